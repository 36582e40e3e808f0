// Representative validated chains for the pointwise generator's unit and
// golden tests (test-only).
#ifndef KFUSE_CODEGEN_POINTWISE_TEST_CHAINS_H_
#define KFUSE_CODEGEN_POINTWISE_TEST_CHAINS_H_

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "codegen/ir.h"
#include "codegen/partition.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse::pointwise_test {

struct TestChain {
  std::string name;
  Chain chain;  // Validated.
  KernelGroup group;
};

inline TensorType T(DType t, std::vector<Dim> dims) { return TensorType{t, std::move(dims)}; }
inline Dim S(int64_t n) { return Dim::Static(n); }

// One pointwise group of every non-input node; results are the outputs.
inline TestChain Finish(std::string name, Chain c) {
  absl::StatusOr<Chain> v = Validate(std::move(c));
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), v.status().ToString().c_str());
    KFUSE_CHECK(false);
  }
  KernelGroup g;
  g.family = Family::kPointwise;
  for (int32_t id = 0; id < static_cast<int32_t>(v->nodes.size()); ++id) {
    OpKind k = v->nodes[id].kind;
    if (k != OpKind::kInput && k != OpKind::kConstant) g.nodes.push_back(id);
  }
  g.results = v->outputs;
  g.reason = "element-wise chain";
  return TestChain{std::move(name), *std::move(v), std::move(g)};
}

// relu(a * b + c), f32 [1024, 1024].
inline TestChain ReluFmaF32() {
  Chain c;
  int a = c.AddInput(T(DType::kF32, {S(1024), S(1024)}));
  int b = c.AddInput(T(DType::kF32, {S(1024), S(1024)}));
  int d = c.AddInput(T(DType::kF32, {S(1024), S(1024)}));
  c.outputs.push_back(c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {a, b}), d})}));
  return Finish("relu_fma_f32", std::move(c));
}

// gelu_tanh(x + bias), bf16 [8192, 4096] with a [4096] bias.
inline TestChain BiasGeluBf16() {
  Chain c;
  int x = c.AddInput(T(DType::kBF16, {S(8192), S(4096)}));
  int bias = c.AddInput(T(DType::kBF16, {S(4096)}));
  c.outputs.push_back(c.AddOp(OpKind::kGeluTanh, {c.AddOp(OpKind::kAdd, {x, bias})}));
  return Finish("bias_gelu_bf16", std::move(c));
}

// a[1000, 1] + b[1, 512] * 0.5, f32.
inline TestChain OuterBroadcast() {
  Chain c;
  int a = c.AddInput(T(DType::kF32, {S(1000), S(1)}));
  int b = c.AddInput(T(DType::kF32, {S(1), S(512)}));
  c.outputs.push_back(c.AddOp(OpKind::kAdd, {a, c.AddOp(OpKind::kMul, {b, c.AddConstant(0.5)})}));
  return Finish("outer_broadcast", std::move(c));
}

// f32(x) * 3.0 + y: f16 in, f32 out.
inline TestChain F16InF32Out() {
  Chain c;
  int x = c.AddInput(T(DType::kF16, {S(4096), S(1000)}));
  int y = c.AddInput(T(DType::kF32, {S(4096), S(1000)}));
  int xf = c.AddCast(x, DType::kF32);
  c.outputs.push_back(c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {xf, c.AddConstant(3.0)}), y}));
  return Finish("f16_in_f32_out", std::move(c));
}

// From x bf16 [4096, 768] and a row scale s bf16 [4096, 1]: silu(x) * s
// (bf16), x > 0 (bool), f32(maximum(x, -1.5)).
inline TestChain ThreeOutputs() {
  Chain c;
  int x = c.AddInput(T(DType::kBF16, {S(4096), S(768)}));
  int s = c.AddInput(T(DType::kBF16, {S(4096), S(1)}));
  c.outputs.push_back(c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSilu, {x}), s}));
  c.outputs.push_back(c.AddOp(OpKind::kGt, {x, c.AddConstant(0)}));
  c.outputs.push_back(
      c.AddCast(c.AddOp(OpKind::kMaximum, {x, c.AddConstant(-1.5)}), DType::kF32));
  return Finish("three_outputs", std::move(c));
}

// sigmoid(x) * y + where(x < 0, 0.25, x) with x, y f32 [N, 4096], N symbolic.
inline TestChain SymbolicRows() {
  Chain c;
  c.symbols.push_back(SymbolInfo{"N", 8192, 0});
  int x = c.AddInput(T(DType::kF32, {Dim::Sym(0), S(4096)}));
  int y = c.AddInput(T(DType::kF32, {Dim::Sym(0), S(4096)}));
  int lt = c.AddOp(OpKind::kLt, {x, c.AddConstant(0)});
  int w = c.AddOp(OpKind::kWhere, {lt, c.AddConstant(0.25), x});
  int sy = c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSigmoid, {x}), y});
  c.outputs.push_back(c.AddOp(OpKind::kAdd, {sy, w}));
  return Finish("symbolic_rows", std::move(c));
}

// x f32 [1000, 6] + bias f32 [6]: a narrow broadcast row and a partial tile.
inline TestChain NarrowRows() {
  Chain c;
  int x = c.AddInput(T(DType::kF32, {S(1000), S(6)}));
  int b = c.AddInput(T(DType::kF32, {S(6)}));
  c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, b}));
  return Finish("narrow_rows", std::move(c));
}

// y = x * s ([256,64]) and z = exp(s) ([256,1]): an output smaller than the
// iteration space, stored once per row.
inline TestChain BroadcastOutput() {
  Chain c;
  int x = c.AddInput(T(DType::kF32, {S(256), S(64)}));
  int s = c.AddInput(T(DType::kF32, {S(256), S(1)}));
  c.outputs.push_back(c.AddOp(OpKind::kMul, {x, s}));
  c.outputs.push_back(c.AddOp(OpKind::kExp, {s}));
  return Finish("broadcast_output", std::move(c));
}

// x^T (a transposed f32 view, strides {1, 512}) - y, then softplus, and a
// 0-d scale: strided loads.
inline TestChain TransposedInput() {
  Chain c;
  int x = c.AddInput(T(DType::kF32, {S(512), S(384)}), {1, 512});
  int y = c.AddInput(T(DType::kF32, {S(512), S(384)}));
  int k = c.AddInput(T(DType::kF32, {}));
  c.outputs.push_back(
      c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSoftplus, {c.AddOp(OpKind::kSub, {x, y})}), k}));
  return Finish("transposed_input", std::move(c));
}

// An odd 1-D length: pow, erf, where on f16 with an i32 input, and an
// explicit f32 -> bf16 cast.
inline TestChain OddLength() {
  Chain c;
  int a = c.AddInput(T(DType::kF16, {S(100003)}));
  int i = c.AddInput(T(DType::kI32, {S(100003)}));
  int f = c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kErf, {a}), i});
  int p = c.AddOp(OpKind::kPow, {c.AddOp(OpKind::kAbs, {a}), c.AddConstant(1.5)});
  c.outputs.push_back(c.AddOp(OpKind::kWhere, {c.AddOp(OpKind::kGe, {i, c.AddConstant(0)}), f, p}));
  c.outputs.push_back(c.AddCast(c.AddOp(OpKind::kGeluErf, {c.AddCast(a, DType::kF32)}), DType::kBF16));
  return Finish("odd_length", std::move(c));
}

// a[64,1,48] * b[1,32,48] and b * 2 ([1,32,48]): three dims, an output
// broadcast over the outermost one.
inline TestChain ThreeDims() {
  Chain c;
  int a = c.AddInput(T(DType::kF32, {S(64), S(1), S(48)}));
  int b = c.AddInput(T(DType::kF32, {S(1), S(32), S(48)}));
  c.outputs.push_back(c.AddOp(OpKind::kMul, {a, b}));
  c.outputs.push_back(c.AddOp(OpKind::kMul, {b, c.AddConstant(2.0)}));
  return Finish("three_dims", std::move(c));
}

// Chains beyond the goldens, for compile and GPU checks.
inline std::vector<TestChain> ExtraChains() {
  std::vector<TestChain> v;
  v.push_back(NarrowRows());
  v.push_back(BroadcastOutput());
  v.push_back(TransposedInput());
  v.push_back(OddLength());
  v.push_back(ThreeDims());
  return v;
}

inline std::vector<TestChain> GoldenChains() {
  std::vector<TestChain> v;
  v.push_back(ReluFmaF32());
  v.push_back(BiasGeluBf16());
  v.push_back(OuterBroadcast());
  v.push_back(F16InF32Out());
  v.push_back(ThreeOutputs());
  v.push_back(SymbolicRows());
  return v;
}

}  // namespace kfuse::pointwise_test

#endif  // KFUSE_CODEGEN_POINTWISE_TEST_CHAINS_H_
