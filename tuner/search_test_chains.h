// Chains the tuner's search tests share, with and without a GPU.
#ifndef KFUSE_TUNER_SEARCH_TEST_CHAINS_H_
#define KFUSE_TUNER_SEARCH_TEST_CHAINS_H_

#include <cstdint>

#include "codegen/ir.h"
#include "codegen/partition.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse {

// relu(a * b + c) over f32[n]; the group is the whole chain.
struct Fixture {
  Chain chain;
  KernelGroup group;
};

// n < 0: a symbol "n" hinted at -n.
inline Fixture ReluChain(int64_t n = 1 << 24, DType t = DType::kF32) {
  Chain c;
  Dim dim = Dim::Static(n);
  if (n < 0) {
    c.symbols.push_back(SymbolInfo{"n", -n, 0});
    dim = Dim::Sym(0);
  }
  int32_t a = c.AddInput(TensorType{t, {dim}});
  int32_t b = c.AddInput(TensorType{t, {dim}});
  int32_t d = c.AddInput(TensorType{t, {dim}});
  int32_t m = c.AddOp(OpKind::kMul, {a, b});
  int32_t s = c.AddOp(OpKind::kAdd, {m, d});
  c.outputs.push_back(c.AddOp(OpKind::kRelu, {s}));
  c.input_names = {"a", "b", "c"};
  c.output_names = {"y"};
  absl::StatusOr<Chain> v = Validate(c);
  KFUSE_CHECK(v.ok());
  absl::StatusOr<Partition> p = PartitionChain(*v);
  KFUSE_CHECK(p.ok() && p->kernels.size() == 1);
  return Fixture{*v, p->kernels[0]};
}

}  // namespace kfuse

#endif  // KFUSE_TUNER_SEARCH_TEST_CHAINS_H_
