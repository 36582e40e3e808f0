// The row-reduction family's generator: one header-free CUDA C++ kernel (for
// NVRTC) for a chain whose reductions all run along the innermost axis of
// rows [..., W], with element-wise work before, between and after them
// (softmax, log_softmax, LayerNorm, RMSNorm, residual add + norm, masks).
// Rows are held in registers when they fit, else re-read per phase (a
// looped schedule: one block's row stays in L2 between passes).
//
//   KernelGroup g = PartitionChain(chain)->kernels[0];   // kRowReduction
//   Variant v = RowHeuristic(chain, g);
//   absl::StatusOr<KernelSpec> k = EmitRow(chain, g, v);
//
// Variant params (Family::kRowReduction):
//   vec       elements per vector access: 1, 2, 4 or 8; vec * the widest
//             per-element buffer <= 16 bytes; vec divides W (statically, or
//             by a kDivisible precondition when W is symbolic).
//   threads   threads per row: 32, 64, 128, 256, 512 or 1024.
//   rows      rows per block: 1, 2, 4, 8 or 16; threads * rows <= 1024.
//   resident  1: each thread loads its share of the row once into registers
//             (static W only, at most min(128, 16384 / block) elements per
//             thread over all per-element inputs); 0: every phase re-reads
//             the row (from L2: one block's row stays resident there); 2:
//             the first pass copies the row's per-row inputs into shared
//             memory, later passes read them there (static W only); 3
//             (sm_90): persistent blocks loop over rows, each row's per-row
//             inputs copied whole into shared memory by bulk copies issued
//             `stages` rows ahead, every pass reading them there (static W,
//             rows=1, at least 128 threads, 16-byte vectors of every such
//             input; a peeled row's vectors start at an element offset that
//             is a multiple of 128 bytes, a 128-byte line when the buffers
//             are 128-byte aligned).
//   stages    resident=3 only: row buffers a block, 1 to 4.
//   grid      resident=3 only: at most this many blocks (grid.x = min(rows,
//             grid)); the space offers multiples of 132 (the H200's SMs).
//   split     optional, 1 (absent), 2, 4 or 8: each row split over a
//             cluster of `split` blocks (sm_90 and later; resident=1,
//             rows=1), each block holding its share of the row's vectors
//             in registers; the blocks' partial reductions meet through
//             distributed shared memory. grid.x = rows of the chain * split;
//             the cluster size is fixed in the source.
//   policy    optional, 0 (absent) or 1: resident=1 rows (not split) load
//             their row-varying inputs with an L2 evict_last policy; the
//             heuristic and space use it for rows of 4-byte elements.
//
// Phases: reductions that depend on others (softmax: max, then the sum of
// exp(x - max)) run in successive passes; independent ones share a pass.
// Accumulation is in f32 (f64 under kReference64), per thread, then warp
// shuffles, then shared memory across the warps of a row.
//
// Launch contract (KernelSpec.params, in order): one pointer per chain input,
// one per chain output, then one i64 scalar per symbol of the row shape
// (ascending). grid.x = ceil_div(rows of the chain, rows) * split
// (resident=3: min(rows of the chain, grid)), block.x = threads * rows;
// dynamic shared memory for resident=2 and 3. Full-row outputs are dense
// [..., W]; per-row outputs dense [...] or [..., 1].
#ifndef KFUSE_CODEGEN_ROW_H_
#define KFUSE_CODEGEN_ROW_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

// row/18: i64 sums, max and min; rows sliced over the grid (slices).
// row/19: f32 sums written as they are (or only added to) add in double in
// each thread, also where a thread adds many terms (no compensation).
// row/20: inputs whose rows start off the dense rows' phase read in vectors
// through windows (two aligned reads, shifted), where they were read
// element by element; bulk-staged, from a copy of the row that starts at
// the 16-byte unit holding its first element.
inline constexpr char kRowGeneratorVersion[] = "row/20";
// What the variant's parameters mean. A generator change that keeps them
// keeps this: stored tuning decisions stay valid and are recompiled, not
// retuned. Bump it when a parameter's meaning or range changes, or a
// parameter is added (a node of the schema before cannot generate it).
inline constexpr char kRowVariantSchema[] = "row-variants/4";  // 4: slices.

// The kernel for `group` (the whole chain, family kRowReduction) of validated,
// canonical `chain` under `variant`. Errors as CanGenerateRow. Same inputs
// give byte-identical source.
absl::StatusOr<KernelSpec> EmitRow(const Chain& chain, const KernelGroup& group,
                                   const Variant& variant, Numerics numerics = Numerics::kFast);

// OK when EmitRow can generate `variant`; InvalidArgument naming the
// offending param otherwise; Unimplemented for groups the family does not
// cover.
absl::Status CanGenerateRow(const Chain& chain, const KernelGroup& group, const Variant& variant);

// Why vectors of `vec` cannot read per-element input `input` (at strides of
// its own, or an offset into its buffer) of rows `row_shape` as they read
// the dense rows, or empty where they can: each of its rows must start at
// the phase the dense rows start at, modulo the vector (a multiple of it,
// rows not peeled) or, peeled (a static width not a multiple of `vec`),
// modulo `align` (the vector, or a bulk-staged row's line). An input whose
// rows start elsewhere is read through windows (row/20); one whose row's
// elements are not consecutive (a transposed tensor's), element by element.
std::string StridedRowsMisfit(const Node& input, const std::vector<Dim>& row_shape, int64_t vec, bool peel,
                              int64_t align);

// The least compute capability (major * 10 + minor) a variant runs on: 90
// for split and bulk-staged rows, 80 otherwise.
int RowMinComputeCapability(const Variant& variant);

// A good variant without timing: the widest safe vector, at least four
// vectors a thread, blocks of at least 128 threads, register-resident when a
// thread holds at most 48 elements (more threads for rows of several
// inputs; rows of 4-byte elements under policy=1); rows of 16384 and more
// bulk-staged (resident=3, 512 threads, two row buffers where they fit, else
// one), or, where that cannot serve, looped with 1024 threads of 4-element
// vectors.
Variant RowHeuristic(const Chain& chain, const KernelGroup& group);

// Every legal variant worth timing (a few dozen), heuristic first, then the
// heuristic's choice among variants every supported GPU runs (where the
// heuristic needs sm_90), the split rows and the bulk-staged rows of wide
// rows, stable.
std::vector<Variant> RowSpace(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_ROW_H_
