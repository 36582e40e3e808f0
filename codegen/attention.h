// The attention family: softmax(f(Q K^T)) V in one kernel with an online
// softmax, so the score matrix never reaches memory (FlashAttention-2's
// schedule on mma.sync), for NVRTC.
//
//   if (std::optional<AttentionMatch> m = MatchAttention(canonical)) {
//     KernelGroup g = AttentionGroup(canonical, *m);     // family kAttention
//     absl::StatusOr<KernelSpec> k = EmitAttention(canonical, g, AttentionHeuristic(canonical, g));
//   }
//
// The chain is the attention composite's expansion (clients' `attention`):
//   s  = matmul(Q, K^T)                     K^T a transposing permute of K
//   x  = f(s, side inputs, iota)            element-wise: scale, bias, masks
//   m  = reduce_max(x, last, keepdim);  e = exp(x - m)
//   z  = reduce_sum(e, last, keepdim);  p = e / z
//   p' = where(m == -inf, 0, p)             optional: masked rows give zeros
//   o  = matmul([cast] p', V)
//   out = g(o, side inputs)                 element-wise, dense reshapes
//   lse = [cast, reshape] (m + log(z))      optional output
// Q [.., Sq, D], K [.., Sk, D] and V [.., Sk, Dv] are chain inputs (or
// permutes, expands, dense reshapes of them: grouped-query heads are batch
// dims of size 1 that the products broadcast), D and Dv static multiples of
// 16 up to 256, D and Dv contiguous. Every node of the chain is one of the
// above; anything else is left to the matmul partition (three kernels).
//
// Schedule: a CTA takes bq rows of Q (one batch index), in `warps` warps of
// bq / warps rows; blocks of bkv keys stream past it, K and V double-buffered
// in shared memory with cp.async. Per block a warp computes its scores with
// mma.sync (Q fragments read with ldmatrix, K tiles K-major), applies f per
// element (row i, key j; keys past Sk are -inf), updates the running row max
// and sum (exp2, the accumulated output rescaled by exp(m_old - m_new)),
// converts the probabilities in registers to the A fragments of P V, and
// accumulates P V. When f masks keys past the query (the causal mask
// `j <= i`, found in f), blocks above the diagonal are skipped and the
// heaviest query blocks launch first. When f reads no memory, the blocks
// every row of the CTA sees in full (in bounds; at or before its first row
// when the causal mask is f's only mask) run in a loop of their own with f
// free of bounds checks and mask, the rest in a second loop. The output is divided by the row sum
// at the end, then g applied and stored.
//
// Variant params (Family::kAttention):
//   bq      query rows per CTA: 64 or 128.
//   bkv     keys per block: 32, 64 or 128.
//   warps   4 or 8; bq / warps a multiple of 16.
//   order   causal launch order: 0 each head's query blocks, heaviest
//           first, head after head (their K and V shared in L2); 1 the
//           heaviest blocks of every head first (the shortest tail).
// A warp's accumulators (bq / warps rows of bkv scores and Dv outputs) must
// fit in registers, the tiles (bq x D + 2 x bkv x (D + Dv), 16-bit) in 227
// KiB of shared memory.
//
// Launch contract: one pointer per chain input (all of them); one per chain
// output (ascending j); then one i64 scalar per symbol the sizes use
// (ascending). grid.x = ceil(Sq / bq) * batch, block = 32 * warps, dynamic
// shared memory = the tiles. Outputs dense in their node's shape.
// Preconditions: Q, K, V 16-byte aligned, their symbolic strides multiples
// of 8; outputs aligned to two elements (paired stores); Sq and Sk at most
// 2^31 - 256 (32-bit rows and keys in the score loops).
//
// Numerics::kReference64 and kEager ignore the schedule: a block of 128
// threads per 8 query rows (fewer when Sq is static and smaller; grid.x =
// ceil(Sq / rows) * batches) computes each row's scores three times (max,
// sum, then P V in chunks of 128 keys through shared memory), every node
// as the chain says: in double, or in f32 with each f16/bf16 node rounded
// (the scores rounded to their dtype as a separate matmul would store
// them). A key's row of K is read once for the block's rows, in 16-byte
// loads, so the yardsticks hold to the preconditions above too; each row's
// arithmetic and its order are those of a block per row.
#ifndef KFUSE_CODEGEN_ATTENTION_H_
#define KFUSE_CODEGEN_ATTENTION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

inline constexpr char kAttentionGeneratorVersion[] = "attention/3";
inline constexpr char kAttentionVariantSchema[] = "attention-variants/1";

// The roles of a recognised attention chain's nodes.
struct AttentionMatch {
  int32_t qk = -1, pv = -1;  // The two matmuls.
  int32_t x = -1;            // The softmax's operand.
  int32_t max = -1, sub = -1, exp = -1, sum = -1, div = -1;
  int32_t guard = -1;        // where(m == -inf, 0, p), or -1.
  int32_t p = -1;            // pv's first operand (p, the guard or a cast).
  // Element-wise nodes computing x from qk, side inputs and iota
  // (ascending; qk excluded), and the views of inputs they read as leaves.
  std::vector<int32_t> score;
  // Element-wise nodes and dense reshapes after pv (ascending).
  std::vector<int32_t> epilogue;
  int32_t lse = -1;               // add(m, log(z)), or -1.
  std::vector<int32_t> lse_tail;  // log(z), then casts and reshapes after lse.
  bool causal = false;            // f masks key j > query i.
  // When f is where(j <= i, y, -inf) and nothing else masks: y, the score
  // where the causal mask holds (blocks below the diagonal compute it
  // alone); else -1.
  int32_t unmasked = -1;
  // When f is c * s (c a positive constant), maybe masked by where(.., -inf)
  // and nothing else: the mul node and c. The kernel then keeps s and
  // folds c into the exponent, exp(c (s - max s)).
  int32_t scaled = -1;
  double scale = 1;
  bool safe = false;              // guard present.
};

// The roles, when the whole canonical chain is an attention (see above);
// nullopt otherwise.
std::optional<AttentionMatch> MatchAttention(const Chain& canonical);

// The one kernel group of a matched chain.
KernelGroup AttentionGroup(const Chain& canonical, const AttentionMatch& m);

absl::StatusOr<KernelSpec> EmitAttention(const Chain& chain, const KernelGroup& group,
                                         const Variant& variant,
                                         Numerics numerics = Numerics::kFast);
// OK when EmitAttention can generate `variant`; InvalidArgument naming the
// param; Unimplemented naming the operand for layouts and head dims the
// kernel does not take.
absl::Status CanGenerateAttention(const Chain& chain, const KernelGroup& group,
                                  const Variant& variant);
Variant AttentionHeuristic(const Chain& chain, const KernelGroup& group);
std::vector<Variant> AttentionSpace(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_ATTENTION_H_
