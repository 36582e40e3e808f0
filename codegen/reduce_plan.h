// Internal to the reduction family: the checked plan the emitter writes from,
// made once and shared by the legality check, the launch contract and the
// source writer.
#ifndef KFUSE_CODEGEN_REDUCE_PLAN_H_
#define KFUSE_CODEGEN_REDUCE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "codegen/pointwise_layout.h"
#include "core/launch.h"

namespace kfuse::reduce_internal {

// A buffer read once per element of the operand: a chain input or an
// intermediate, with its element stride along each dim of Plan::shape (zero
// where it is broadcast or the dim is a static 1).
struct Leaf {
  int32_t node = -1;
  BufferRef buffer;
  DType dtype = DType::kInvalid;
  std::vector<Mono> strides;
  bool vector = false;  // Read `vec` elements at once (stride 1 along the innermost dim).
  // Read `vec` consecutive elements off the vectors' alignment at once,
  // through a window (kf_ldw: two aligned reads, shifted).
  bool window = false;
};

struct Plan {
  int32_t reduction = -1;
  Numerics numerics = Numerics::kFast;
  // Schedule: a block of `block` threads is `split` rows of block / split
  // threads; a thread reduces `vec` adjacent outputs over every split-th
  // index of reduced dim `split_dim` within its block's slice, one of
  // `slices` along that dim, and over the whole of the other reduced dims.
  int block = 256, split = 1, slices = 1, vec = 1;
  int split_dim = -1;  // The longest reduced dim (by hint when symbolic).
  std::vector<Dim> shape;            // The operand's: the iteration space.
  std::vector<bool> reduced;         // Per dim of `shape`.
  std::vector<int32_t> compute;      // Element-wise nodes of the operand, ascending.
  std::vector<Leaf> leaves;          // Inputs (by input index), then intermediates.
  std::vector<uint32_t> outputs;     // Positions in chain.outputs of the reduction.
  bool writes_intermediate = false;  // Later kernels read the reduction.
  std::vector<int32_t> symbols;      // Of `shape`, ascending.
  std::vector<Precondition> preconditions;
  int Lanes() const { return block / split; }  // Threads of a block along the outputs.
  bool Staged() const { return split > 1 || slices > 1; }
};

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics);

struct Source {
  std::string entry, text;
};
absl::StatusOr<Source> WriteSource(const Chain& chain, const Plan& plan);

}  // namespace kfuse::reduce_internal

#endif  // KFUSE_CODEGEN_REDUCE_PLAN_H_
