// The iteration space of a pointwise kernel group: which buffers it reads and
// writes, each buffer's element strides over the broadcast output shape, and
// that shape with size-1 dims dropped and mergeable dims merged (as PyTorch's
// TensorIterator coalesces), so a dense chain indexes linearly and a bias
// [1,M] against [N,M] needs one division per vector. Shared by the pointwise
// generator's legality check and its emitter.
//
//   absl::StatusOr<IterSpace> s = BuildIterSpace(chain, group);
//   s->sizes;                 // {Mono{4096 * N}} for a dense [N,4096] chain.
#ifndef KFUSE_CODEGEN_POINTWISE_LAYOUT_H_
#define KFUSE_CODEGEN_POINTWISE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/expr.h"
#include "core/launch.h"

namespace kfuse {

// coef * product of symbols: sizes and strides are exact monomials, so
// "stride[d] == stride[d+1] * size[d+1]" is decided exactly even with
// symbolic dims.
struct Mono {
  int64_t coef = 1;
  std::vector<int32_t> syms;  // Sorted symbol indices, with repeats.

  static Mono Of(const Dim& d);
  bool is_zero() const { return coef == 0; }
  bool is_static() const { return syms.empty(); }
  SizeExpr ToExpr() const;
  friend bool operator==(const Mono& a, const Mono& b) {
    return a.coef == b.coef && (a.coef == 0 || a.syms == b.syms);
  }
  friend bool operator!=(const Mono& a, const Mono& b) { return !(a == b); }
};
Mono operator*(const Mono& a, const Mono& b);
// a is a whole multiple of b (b's coefficient divides a's, b's symbols are
// among a's).
bool IsMultipleOf(const Mono& a, const Mono& b);
// Upper bound with symbols at their max; -1 when a symbol has no max.
int64_t UpperBound(const Mono& m, const Chain& chain);

// A buffer the kernel reads or writes, with its strides over IterSpace::sizes.
struct Operand {
  BufferRef buffer;
  int32_t node = -1;  // The chain node whose value the buffer holds.
  DType dtype = DType::kInvalid;
  std::vector<Mono> strides;  // One per iteration dim; zero = broadcast.
  bool dense = false;         // Strides are the iteration space's own.
  bool uniform = false;       // Every stride is zero: one element.
};

struct IterSpace {
  std::vector<Mono> sizes;  // Collapsed; at least one dim.
  Mono numel;
  std::vector<Operand> inputs;   // Chain inputs then intermediates, as read.
  std::vector<Operand> outputs;  // Chain outputs then intermediates, as written.
  std::vector<int32_t> compute;  // Non-input group nodes outputs depend on, in order.
  std::vector<int32_t> symbols;  // Symbols used by any size or stride, ascending.
  // True when some operand needs coordinates (neither dense nor uniform).
  bool needs_coords() const;
};

// Errors: InvalidArgument for a group that is empty or refers to no node,
// Unimplemented for nodes the pointwise family cannot compute (reductions,
// permute, reshape, ...).
absl::StatusOr<IterSpace> BuildIterSpace(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_POINTWISE_LAYOUT_H_
