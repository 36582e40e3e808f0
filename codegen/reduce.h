// The reduction family's generator: one header-free CUDA C++ kernel (for
// NVRTC) that computes one reduction (sum, max, min, mean) over outer axes,
// those without the innermost one (a column sum of [N, M], the sequence axis
// of [B, S, H]), of an element-wise operand it computes inline from chain
// inputs, constants and earlier kernels' results. Chains that reduce over
// outer axes become several kernels: see PartitionChain.
//
//   KernelGroup g = PartitionChain(chain)->kernels[0];   // kReduction
//   Variant v = ReduceHeuristic(chain, g);   // {block=256,slices=4,split=8,vec=4}
//   absl::StatusOr<KernelSpec> k = EmitReduce(chain, g, v);
//
// Variant params (Family::kReduction; absent ones are 1):
//   block   threads per block: 128, 256 or 512.
//   split   the block's threads are split rows of block / split threads
//           (a power of two, at most block / 32): each row takes every
//           split-th index of split_dim, the longest reduced dim.
//   slices  blocks along split_dim (a power of two, at most 1024), each
//           reducing a contiguous slice of it.
//   vec     adjacent outputs a thread (along the innermost dim): 1, 2, 4 or
//           8; needs a static innermost dim that is a multiple of vec, and
//           every operand contiguous (stride 1) or broadcast (stride 0)
//           along it. Operands whose rows start at multiples of vec and
//           whose vectors are at most 16 bytes are read a vector at a time
//           (a kAligned precondition each); others an element at a time.
//
// Schedule: block.x / split threads take adjacent outputs (vec each), so
// every load of a pass is coalesced; each thread loops over the reduced
// index space, outer dims first, split_dim by its row's stride within the
// block's slice. Accumulation in f32 (f64 under kReference64; int for integer
// sums, which wrap), Kahan-compensated for floating-point sums (under kEager
// too: a serial sum down a whole column would make a far laxer yardstick than
// PyTorch's cascaded sums) except in fast kernels of f16/bf16 results, whose
// rounding is far above an f32 sum's error; NaN-propagating for max and min. A block's rows
// meet in shared memory, added in row order by the first; with slices > 1
// each block writes its value to a workspace and the last block of a column
// of blocks to finish (a counter per column) adds the slices in order (its
// rows each take every split-th slice, then meet as before), so results do
// not depend on timing. Mean is the sum over the count of reduced elements.
// Indices are 64-bit.
//
// The heuristic takes the widest vec some operand is read in; when the
// outputs alone would not give a quarter of the H200's resident threads
// (132 x 2048 / 4, each with four 16-byte loads in flight), rows of 32
// threads (split 8, less where the reduced dims are short) and as many
// slices as make that up, while each thread keeps at least 32 indices to add.
// Under kReference64 vec is taken as 1 (one output a thread; grid.x
// follows), the other params as given.
//
// Launch contract (KernelSpec.params, in order): one pointer per chain input
// (every input, read or not); one per intermediate the kernel reads
// (BufferRef{kIntermediate, node id}, ascending node id); one per chain
// output it writes (the reduction, ascending output position); one for the
// reduction's intermediate when later kernels read it
// (KernelGroup::intermediates); with slices > 1 a workspace of slices x
// outputs partial values (of the compute type: 4 bytes, 8 for double under
// kReference64) and one of a 4-byte counter per column of blocks (zeroed);
// then one i64 scalar per symbol of the operand's shape (ascending). grid.x
// = ceil_div(outputs, block / split * vec), grid.y = slices, block.x =
// block; an empty output gives grid 0 (the launcher skips it). Outputs and
// intermediates are dense in the reduction's shape.
//
// Numerics::kReference64 writes outputs and intermediates as double, and
// reads the intermediates it consumes as double (as the pointwise family
// does), so a plan emitted wholly in kReference64 is consistent.
#ifndef KFUSE_CODEGEN_REDUCE_H_
#define KFUSE_CODEGEN_REDUCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

// reduce/3: 16-bit results stored for later kernels in f32 (IntermediateDType).
// reduce/4: the innermost reduced loop in batches whose loads go out together.
// reduce/5: split rows finish one output a thread; plain sums get 40 registers.
// reduce/6: i64 sums, max and min (8-byte workspace partials).
// reduce/7: consecutive leaves off the vectors' alignment read through
// windows (kf_ldw), not an element at a time.
inline constexpr char kReduceGeneratorVersion[] = "reduce/7";
// What the variant's parameters mean. A generator change that keeps them
// keeps this: stored tuning decisions stay valid and are recompiled, not
// retuned. Bump it when a parameter's meaning or range changes.
inline constexpr char kReduceVariantSchema[] = "reduce-variants/2";

// OK when reduction `node` of validated `chain` is one the family computes:
// over a non-empty set of axes without the innermost one. Unimplemented,
// naming the op, for a reduction of a scalar, one over the innermost axis
// and outer axes together, or min/max of bool values.
absl::Status CheckOuterReduction(const Chain& chain, int32_t node);

// The kernel for `group` (one reduction, the element-wise nodes of its
// operand, family kReduction) of validated, canonical `chain` under
// `variant`. Errors as CanGenerateReduce. Same inputs give byte-identical
// source.
absl::StatusOr<KernelSpec> EmitReduce(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant,
                                      Numerics numerics = Numerics::kFast);

// OK when EmitReduce can generate `variant`; InvalidArgument naming the
// offending param or the malformed group; Unimplemented for reductions the
// family does not cover.
absl::Status CanGenerateReduce(const Chain& chain, const KernelGroup& group,
                               const Variant& variant);

// As described above.
Variant ReduceHeuristic(const Chain& chain, const KernelGroup& group);

// The heuristic first, then its neighbours: split as the heuristic's, 8, 4
// or 1 with a quarter, the same or four times its slices; its twin without
// vectors; a thread an output with and without vectors.
std::vector<Variant> ReduceSpace(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_REDUCE_H_
