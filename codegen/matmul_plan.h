// Internal to the matmul family: the checked plan the emitter writes from.
#ifndef KFUSE_CODEGEN_MATMUL_PLAN_H_
#define KFUSE_CODEGEN_MATMUL_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/expr.h"
#include "core/launch.h"

namespace kfuse::matmul_internal {

// A buffer the kernel reads: a chain input or an intermediate of an earlier
// kernel, with the element strides of the value the group reads from it.
struct Access {
  int32_t node = -1;  // The buffer's node: a kInput, or an intermediate.
  BufferRef buffer;
  DType dtype = DType::kInvalid;
  std::vector<SizeExpr> strides;  // One per dim of the value read; 0: broadcast.
  SizeExpr offset = SizeExpr::Const(0);  // Elements from the buffer's start (a slice's).
  // Per dim of `strides`, where not 1: the index is divided by it before
  // its stride is applied (a broadcast dim merged into the one before it,
  // as repeated grouped-query heads are: head h reads h / G). Empty: none.
  std::vector<int64_t> divisors;
  bool divided() const {
    return std::any_of(divisors.begin(), divisors.end(), [](int64_t d) { return d != 1; });
  }
};

struct Plan {
  Numerics numerics = Numerics::kFast;
  int32_t matmul = -1;
  Access a, b;  // Operands, strides over [.., M, K] and [.., K, N].
  // Output [batch.., M, N]: batch dims, then the product's sizes.
  std::vector<Dim> batch;
  SizeExpr batches = SizeExpr::Const(1);  // Their product: grid.z.
  Dim m, n, k;
  bool a_kmajor = true, b_kmajor = false;  // Which inner dim is contiguous.
  // Epilogue: group nodes after the product (ascending), the leaves and
  // intermediates they read (with strides over the output's dims).
  std::vector<int32_t> epilogue;
  // The epilogue's nodes with one value per row ([.., M, 1]): reductions
  // along N, whose rows a CTA's tile holds whole (N static, at most bn),
  // and element-wise work on their values alone. The others have a value
  // per output element.
  std::set<int32_t> per_row;
  std::vector<Access> reads;
  std::vector<int32_t> intermediates_read;  // Ascending node ids.
  std::vector<int32_t> results;             // group.results.
  std::vector<int32_t> written;             // Results later kernels read.
  std::vector<int32_t> symbols;             // Symbols the sizes use, ascending.
  std::vector<Precondition> preconditions;
  // Schedule (kFast only).
  int bm = 128, bn = 256, bk = 32, wm = 2, wn = 4, stages = 4, group = 8, splitk = 1;
  // The streaming schedule for few rows (variant param stream = 1): B goes
  // from global memory straight to registers in batches of `stages` steps
  // of 32 along K a warp; wk warps split the CTA's K, wn warps of 64
  // columns split its bn. Otherwise the tiled schedule (shared-memory
  // stages).
  bool stream = false;
  int wk = 1;
  // Split K over a cluster of the tile's splitk CTAs (variant param
  // cluster = 1, sm_90): the slices meet in distributed shared memory.
  bool cluster = false;
  int smem_bytes = 0;
  bool Rows() const { return !per_row.empty(); }
  // Results stored two columns at a time (N static and even; the results'
  // buffers aligned to two elements, a precondition).
  bool pair = false;
};

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics);

// C++ for a size: "4096LL" or the symbol's kernel parameter ("s2").
std::string SizeCode(const SizeExpr& e);
SizeExpr DimSize(const Dim& d);
// C++ for the sum of index * stride over `idx` (one C++ index per dim;
// zero strides skipped): "kf_b0 * 4096LL + er", or "0LL".
std::string Offset(const std::vector<SizeExpr>& strides, const std::vector<std::string>& idx);
// Statements defining the per-dim batch indices kf_b<d> of `batch` from the
// linear batch index eb ("" without batch dims).
std::string BatchDecomposition(const std::vector<Dim>& batch);

// Shared with the attention family, which reads its operands as the
// matmul does.
SizeExpr Mul(const SizeExpr& a, const SizeExpr& b);
bool IsOne(const Dim& d);
std::vector<SizeExpr> DenseStrides(const std::vector<Dim>& shape);
// Element-wise equal (constants by value, other expressions by their code).
bool SameStrides(const std::vector<SizeExpr>& a, const std::vector<SizeExpr>& b);
// The buffer behind value `id` and its strides over the value's own dims: a
// chain input; a permute, expand, slice or reshape (where strides can say
// it) of one; or another kernel's node (an intermediate, dense). Unimplemented for
// constants and nodes in `mine` (computed by the kernel itself).
absl::StatusOr<Access> Resolve(const Chain& c, int32_t id, const std::set<int32_t>& mine);
// Strides of `a` (over a value of `shape`) re-indexed by `frame`, the dims
// the kernel iterates, right-aligned; broadcast dims get stride 0.
std::vector<SizeExpr> Align(const Access& a, const std::vector<Dim>& shape,
                            const std::vector<Dim>& frame);
void CollectSymbols(const SizeExpr& e, std::set<int32_t>* out);
Precondition Divisible(const SizeExpr& e, int64_t by, std::string what);
// Operand `which` (0: A, 1: B) of matmul node `mm`, read in 16-byte chunks
// along its contiguous inner dim (`contiguous_extent` long): f16/bf16, the
// other strides multiples of 8 (else Unimplemented naming the operand), and
// the preconditions that keeps (alignment, symbolic strides) added to `pre`.
absl::Status CheckOperand(const Chain& c, int32_t mm, int which, const Access& a,
                          const Dim& contiguous_extent, std::vector<Precondition>* pre);

struct Source {
  std::string entry, text;
};
absl::StatusOr<Source> WriteSource(const Chain& chain, const Plan& plan);

}  // namespace kfuse::matmul_internal

#endif  // KFUSE_CODEGEN_MATMUL_PLAN_H_
