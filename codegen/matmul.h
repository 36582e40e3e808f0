// The matmul family's generator: a tensor-core matrix product (mma.sync,
// f16/bf16 operands, f32 accumulation) with its element-wise epilogue applied
// to the accumulators in registers before the one store, for NVRTC.
//
//   KernelGroup g = PartitionChain(chain)->kernels[0];   // kMatmul
//   Variant v = MatmulHeuristic(chain, g);
//   absl::StatusOr<KernelSpec> k = EmitMatmul(chain, g, v);
//
// A group holds one matmul node and the element-wise nodes after it (bias,
// activation, residual, scale, cast) whose shape is the product's; their
// other operands are chain inputs, constants, element-wise work on those, or
// intermediates of earlier kernels, read broadcast at each output element.
// The group may also reduce along the product's rows (sum, max, min, mean
// over N, kept) when a CTA's tile holds them whole (N static, at most
// kMaxEpilogueRow, bn >= N), with element-wise work before and after and
// per-row work ([.., M, 1]) on the reductions' values alone: softmax or
// LayerNorm of a narrow product in one kernel. Results are of the
// product's shape or one value per row.
// Each operand of the product is a chain input (dense or strided), a
// transposing permute or a batch-broadcasting expand of one, or an
// intermediate (dense); one of its two inner dims must be contiguous: A
// [.., M, K] K- or M-major, B [.., K, N] N- or K-major (a linear layer's
// weight [N, K] read as its transpose).
//
// Schedule: a CTA computes a bm x bn tile of C, in warps of wm x wn, each a
// (bm/wm) x (bn/wn) tile of m16n8k16 products. Operand tiles of bk along K
// stream through `stages` shared-memory buffers with cp.async (16-byte
// copies, zero-filled past the edges), in rows of 16-byte chunks XOR-swizzled
// so ldmatrix (.trans for M-major A and N-major B) reads without bank
// conflicts. CTAs are rastered in groups of `group` tile rows for L2 reuse.
// With splitk > 1 each CTA sums a slice of K into an f32 workspace; the last
// of a tile's CTAs to finish (a counter per tile) adds the slices in slice
// order, so results do not depend on timing, and applies the epilogue.
// With cluster = 1 (sm_90) a tile's splitk CTAs are one cluster instead:
// the slices meet in distributed shared memory, added in slice order as
// above, and the kernel needs no workspace (nor a zeroing before launch).
//
// Few rows (M up to 64) stream instead (variant param stream = 1): B goes
// from global memory straight to registers in 16-byte loads, in batches of
// `stages` steps of 32 along K a warp (the next batch in flight while this
// one's products run), and the m16n8k16 products take B's
// transpose as their first operand (column pairs of N-major B split by
// byte permutes), A's rows as their second, read through L1. A CTA of
// wn x wk warps covers bm rows and bn = 64 * wn columns; its wk warps
// split its K and add their sums in shared memory in warp order; split K
// across CTAs as above. A must be K-major; no row reductions.
//
// Variant params (Family::kMatmul):
//   bm, bn    CTA tile: bm in 16, 32, 64, 128, 256; bn in 32, 64, 128, 256
//             (bn at least N when the epilogue reduces rows).
//   bk        K per stage: 32, 64 or 128.
//   wm, wn    warps along M and N; wm * wn in 1, 2, 4, 8; bm / wm and
//             bn / wn multiples of 16.
//   stages    shared-memory buffers, 2 to 6; stages * (bm + bn) * bk * 2
//             bytes at most 227 KiB.
//   group     tile rows per raster group: 1, 4, 8 or 16.
//   splitk    K slices: 1, 2, 4, 8 or 16; K / splitk at least bk.
//   cluster   1: the slices of a tile are one cluster (splitk 2, 4 or 8;
//             sm_90); the tiled schedule's shared memory is then at least
//             bm * bn * 4 bytes (a slice's partial tile). Absent or 0: the
//             workspace.
//   stream    1 for the streaming schedule (absent or 0: tiled). Its
//             params: bm in 8, 16, 32, 64; wn in 1, 2, 4, 8 and bn = 64 *
//             wn; wk in 1, 2, 4, 8, 16 (wn * wk at most 16); stages 1 to 4
//             (the registers they and the accumulators take, about
//             stages * (32 + bm / 2) + 2 * bm + 48, at most 240 and 65536
//             a block); splitk as above, K / splitk at least 32 * wk;
//             wk * bm * (bn + 1) * 4 bytes of shared memory at most 227 KiB.
//             bk (32), wm (1) and group (1) are fixed.
//
// Launch contract (KernelSpec.params, in order): one pointer per chain input
// (every input, read or not); one per intermediate the group reads
// (BufferRef{kIntermediate, node id}, ascending node id); one per chain
// output it writes (ascending j); one per intermediate it writes (ascending
// node id); with splitk > 1 and no cluster a workspace of f32 partial tiles
// and one of per-tile counters (zeroed); then one i64 scalar per symbol the sizes use
// (ascending). grid = (tiles of C, splitk, batch), block = 32 * wm * wn,
// dynamic shared memory = the stages' bytes; a cluster of (1, splitk, 1)
// fixed in the source (__cluster_dims__) with cluster = 1; streamed, block = 32 * wn * wk,
// shared memory the warps' sums, row tiles fastest along grid.x. Results
// are dense in their node's shape.
// Preconditions: the operands' base addresses 16-byte aligned; a symbolic
// contiguous extent or stride divisible by 8.
//
// Numerics::kReference64 and kEager ignore the schedule: a thread per output
// element walks K (in double, or in f32 with the product rounded to its
// dtype as a separate matmul would store it), then the epilogue under those
// numerics; a group that reduces rows runs a block per row (grid.x = M,
// block.x = N rounded up to 32), a thread per column, its reductions
// summed in column order through shared memory. They read every operand in its own dtype, intermediates
// included, and kReference64 writes outputs and intermediates as double.
#ifndef KFUSE_CODEGEN_MATMUL_H_
#define KFUSE_CODEGEN_MATMUL_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

inline constexpr char kMatmulGeneratorVersion[] = "matmul/8";
// What the variant's parameters mean (see kRowVariantSchema).
inline constexpr char kMatmulVariantSchema[] = "matmul-variants/3";

// The kernel for `group` (family kMatmul) of validated, canonical `chain`
// under `variant`. Errors as CanGenerateMatmul. Same inputs give
// byte-identical source.
absl::StatusOr<KernelSpec> EmitMatmul(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant,
                                      Numerics numerics = Numerics::kFast);

// OK when EmitMatmul can generate `variant`; InvalidArgument naming the
// offending param otherwise; Unimplemented, naming the op or operand, for
// groups the family does not cover (f32 operands, a product whose operands
// have no contiguous inner dim, epilogue ops that are not element-wise).
// The oldest compute capability that runs `variant`: 90 with cluster = 1,
// else 80.
int MatmulMinComputeCapability(const Variant& variant);

absl::Status CanGenerateMatmul(const Chain& chain, const KernelGroup& group,
                               const Variant& variant);

// A good variant without timing: 128 x 256 tiles of 8 warps for large
// products; for few rows (M <= 64) the streaming schedule where it applies
// (else narrow tiles and split K), so that about one wave of CTAs keeps
// every SM streaming the weights; when the epilogue reduces rows, the
// narrowest tile width that holds them.
Variant MatmulHeuristic(const Chain& chain, const KernelGroup& group);

// The legal variants worth timing (at most 24), heuristic first, stable.
std::vector<Variant> MatmulSpace(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_MATMUL_H_
