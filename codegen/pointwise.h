// The pointwise family's generator: one header-free CUDA C++ kernel (for
// NVRTC) that computes a group of element-wise ops and layout views (slice,
// permute, reshape, expand, concat; as index arithmetic, pointwise_views.h)
// over the broadcast shape of its outputs, with its launch contract, its
// search space and a heuristic seed.
//
//   KernelGroup g{Family::kPointwise, {3, 4, 5}, "element-wise chain"};
//   Variant v = PointwiseHeuristic(chain, g);      // {block,grid,items,vec}
//   absl::StatusOr<KernelSpec> k = EmitPointwise(chain, g, v);
//
// Variant params (Family::kPointwise):
//   vec    elements per vector access: 1, 2, 4 or 8, with vec * the widest
//          storage dtype of any buffer <= 16 bytes. When the collapsed
//          iteration space has more than one dim (a broadcast or strided
//          operand), vec must divide the innermost dim (statically, or by a
//          kDivisible precondition when it is symbolic). A concat whose
//          pieces meet inside the innermost dim needs every boundary there
//          to be a multiple of vec. A read that a view makes strided, or
//          offset from a multiple of vec, goes lane by lane (no alignment
//          asked of its buffer).
//   items  vectors per thread per pass: 1, 2 or 4.
//   block  threads per block: 128, 256, 512 or 1024.
//   grid   0: one pass, grid.x = ceil_div(numel, block * vec * items).
//          g > 0: at most g blocks (grid.x = min(g, ceil_div(...))) and a
//          grid-stride loop. The space offers multiples of 132 (the H200's
//          SM count); any positive value is legal.
//
// Launch contract (KernelSpec.params, in order): one pointer per chain input
// (every input, read or not, so the contract is simple); one per
// intermediate the group reads (BufferRef{kIntermediate, node id}, ascending
// node id); one per chain output the group writes (BufferRef{kOutput, j},
// ascending j); one per intermediate it writes; then one i64 scalar per
// symbol any size uses (SizeExpr::Symbol(s), ascending s). Inside, the kernel
// indexes in int32 when every index is provably below 2^31 (static sizes, or
// every symbol bounded by SymbolInfo::max, then checked by kAtMost
// preconditions), else in int64. numel 0 gives grid 0: the launcher skips it.
//
// Numerics::kReference64 ignores vec and items (one element per thread) and
// writes every output and intermediate as double: the runner allocates 8
// bytes per element for each of them. Inputs keep their dtypes.
#ifndef KFUSE_CODEGEN_POINTWISE_H_
#define KFUSE_CODEGEN_POINTWISE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

// pointwise/2: iotas (an element's coordinate); i64 views.
// pointwise/3: vectors as wide as the operands moved as vectors allow
// (broadcast and strided operands no longer narrow them).
// pointwise/4: consecutive operands off the vectors' alignment read through
// windows (kf_ldw: two aligned reads, shifted), not element by element.
inline constexpr char kPointwiseGeneratorVersion[] = "pointwise/4";
// What the variant's parameters mean. A generator change that keeps them
// keeps this: stored tuning decisions stay valid and are recompiled, not
// retuned. Bump it when a parameter's meaning or range changes.
// pointwise-variants/2: vec's range grew where a broadcast or strided
// operand is wider than the others.
inline constexpr char kPointwiseVariantSchema[] = "pointwise-variants/2";

// The kernel for `group` of validated `chain` under `variant`. Errors as
// CanGenerate. Same inputs give byte-identical source.
absl::StatusOr<KernelSpec> EmitPointwise(const Chain& chain, const KernelGroup& group,
                                         const Variant& variant,
                                         Numerics numerics = Numerics::kFast);

// Every legal variant worth timing (at most about 40), in a stable order.
std::vector<Variant> PointwiseSpace(const Chain& chain, const KernelGroup& group);

// A good variant without timing: 16-byte vectors (the widest that divides a
// broadcast row), 32 bytes per thread per input for 4-byte dtypes and 64 for
// 16-bit ones, 256 threads, one pass; one item per thread when that leaves
// fewer than two waves of blocks on 132 SMs. Legal when the group is.
Variant PointwiseHeuristic(const Chain& chain, const KernelGroup& group);

// OK when EmitPointwise can generate `variant`; InvalidArgument naming the
// offending param otherwise; Unimplemented for groups the family does not
// cover.
absl::Status CanGenerate(const Chain& chain, const KernelGroup& group, const Variant& variant);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_POINTWISE_H_
