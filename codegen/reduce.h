// The reduction family's generator: one header-free CUDA C++ kernel (for
// NVRTC) that computes one reduction (sum, max, min, mean) over outer axes,
// those without the innermost one (a column sum of [N, M], the sequence axis
// of [B, S, H]), of an element-wise operand it computes inline from chain
// inputs, constants and earlier kernels' results. Chains that reduce over
// outer axes become several kernels: see PartitionChain.
//
//   KernelGroup g = PartitionChain(chain)->kernels[0];   // kReduction
//   Variant v = ReduceHeuristic(chain, g);              // {block=256}
//   absl::StatusOr<KernelSpec> k = EmitReduce(chain, g, v);
//
// Variant params (Family::kReduction):
//   block  threads per block: 128, 256 or 512.
//
// Schedule: one thread per output element (per kept index); it loops over
// the reduced index space, outer axes first. Consecutive threads take
// consecutive innermost (kept) indices, so every load of a pass is
// coalesced. Accumulation in f32 (f64 under kReference64; int for integer
// sums, which wrap), Kahan-compensated for floating-point sums (under kEager
// too: a serial sum down a whole column would make a far laxer yardstick than
// PyTorch's cascaded sums), NaN-propagating for max and min; mean is the sum
// over the count of reduced elements. Indices are 64-bit.
//
// Launch contract (KernelSpec.params, in order): one pointer per chain input
// (every input, read or not); one per intermediate the kernel reads
// (BufferRef{kIntermediate, node id}, ascending node id); one per chain
// output it writes (the reduction, ascending output position); one for the
// reduction's intermediate when later kernels read it
// (KernelGroup::intermediates); then one i64 scalar per symbol of the
// operand's shape (ascending). grid.x = ceil_div(outputs, block), block.x =
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

inline constexpr char kReduceGeneratorVersion[] = "reduce/1";
// What the variant's parameters mean. A generator change that keeps them
// keeps this: stored tuning decisions stay valid and are recompiled, not
// retuned. Bump it when a parameter's meaning or range changes.
inline constexpr char kReduceVariantSchema[] = "reduce-variants/1";

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

// 256 threads per block.
Variant ReduceHeuristic(const Chain& chain, const KernelGroup& group);

// Every legal variant (block 128, 256, 512), heuristic first.
std::vector<Variant> ReduceSpace(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_REDUCE_H_
