// The iteration space of a pointwise kernel group: which buffers it reads and
// writes, each buffer's element strides over the broadcast output shape, and
// that shape with size-1 dims dropped and mergeable dims merged (as PyTorch's
// TensorIterator coalesces), so a dense chain indexes linearly and a bias
// [1,M] against [N,M] needs one division per vector. Layout views (slice,
// permute, reshape, expand, concat) are index arithmetic here: each read is
// a buffer at an offset and strides of its own, and a concat is a choice
// between its pieces by the coordinate along its axis (pointwise_views.h).
// Shared by the pointwise generator's legality check and its emitter.
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

// A sum of monomials (an index offset): like terms combined, no zero terms,
// ordered by symbols. Empty: zero.
using Poly = std::vector<Mono>;
void AddTo(Poly* p, const Mono& m);

// A buffer the kernel reads or writes, with its strides over IterSpace::sizes:
// element (c_0, ..., c_r) is at offset + sum_d strides[d] * c_d. A buffer read
// through several views is several operands.
struct Operand {
  BufferRef buffer;
  int32_t node = -1;  // The chain node whose value the buffer holds.
  DType dtype = DType::kInvalid;
  std::vector<Mono> strides;  // One per iteration dim; zero = broadcast.
  Poly offset;                // Slices' starts, concat pieces' shifts; outputs: empty.
  std::vector<int32_t> guard; // Conds (IterSpace::conds) that must all hold for the
                              // read to be in bounds (a concat piece's); empty: always.
  bool dense = false;         // Strides are the iteration space's own.
  bool uniform = false;       // Every stride is zero: one element.
};

// Which piece of a concat an element takes: offset + sum_d strides[d] * c_d
// (the coordinate along the concat's axis) is in [lo, hi). An iota's cond
// (`coordinate`) is that coordinate itself, the iota's value, unbounded.
struct Cond {
  int32_t node = -1;  // The concat, or the iota.
  bool coordinate = false;
  std::vector<Mono> strides;
  Poly offset;
  bool has_lo = false, has_hi = false;
  int64_t lo = 0, hi = 0;
  bool dense = false, uniform = false;  // As for Operand.
};

// One value the kernel computes per element, in compute types.
struct Term {
  enum class Kind : uint8_t {
    kLoad,    // IterSpace::inputs[operand].
    kOp,      // Element-wise `node` of the terms `args` (its operands, in order).
    kSelect,  // Concat `node`: args[i] where conds[i] holds, the last piece otherwise.
    kIota,    // Iota `node`: the coordinate conds[0], in its dtype.
  };
  Kind kind = Kind::kOp;
  int32_t node = -1;
  int32_t operand = -1;
  std::vector<int32_t> args;
  std::vector<int32_t> conds;
};

struct IterSpace {
  std::vector<Mono> sizes;  // Collapsed; at least one dim.
  Mono numel;
  std::vector<Operand> inputs;   // Chain inputs then intermediates, as read.
  std::vector<Operand> outputs;  // Chain outputs then intermediates, as written.
  std::vector<Cond> conds;       // Concat choices, in first use order.
  std::vector<Term> terms;       // By ascending node: a term's args come before it.
  std::vector<int32_t> results;  // Parallel to outputs: the term each one stores.
  std::vector<int32_t> compute;  // Non-input group nodes outputs depend on, in order.
  std::vector<int32_t> symbols;  // Symbols used by any size, stride or offset, ascending.
  // True when some operand or cond needs coordinates (neither dense nor uniform).
  bool needs_coords() const;
};

// Errors: InvalidArgument for a group that is empty or refers to no node,
// Unimplemented for nodes the pointwise family cannot compute (reductions,
// matmul, iota) and for a reshape that is no view of what it reshapes (it
// merges dims that are not evenly spaced in memory), naming the op.
absl::StatusOr<IterSpace> BuildIterSpace(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_POINTWISE_LAYOUT_H_
