// One element of one element-wise op, with PyTorch's semantics: shared by the
// reference evaluator and constant folding so both agree bit for bit.
//
//   double r = EvalScalar(node, ComputeDType(chain, id), {a, b}, /*eager=*/true);
#ifndef KFUSE_CODEGEN_SCALAR_EVAL_H_
#define KFUSE_CODEGEN_SCALAR_EVAL_H_

#include "absl/types/span.h"
#include "codegen/ir.h"

namespace kfuse {

// Applies element-wise `n` (not a constant) to `args`, each already a value of
// its operand's dtype. `compute` is ComputeDType() of the node. Eager: float
// work is done in f32 (operands converted to `compute` first) and the result
// is rounded to n.type.dtype, as eager PyTorch materialises it. Not eager:
// float work is done in double and only casts and integer results round.
// Integer arithmetic wraps at 32 bits in both modes.
double EvalScalar(const Node& n, DType compute, absl::Span<const double> args, bool eager);

// Exact folding: the result of `n` on constant `args` when the exact value is
// representable in n.type.dtype, so folding cannot change any output bit;
// false when it is not (exp(1), 1/3, overflow, NaN) or the op is not foldable.
bool FoldExactly(const Node& n, DType compute, absl::Span<const double> args, double* result);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_SCALAR_EVAL_H_
