// The CPU reference evaluator: what a chain computes, in fp64 (the accuracy
// reference) or as eager PyTorch would (the error baseline a fused kernel must
// match or beat). For tests and the GPU checks; slow on purpose.
//
//   auto out = Evaluate(chain, {x_values}, /*symbol_values=*/{1024},
//                       EvalMode::kExact64);
//   double y0 = (*out)[0][0];
#ifndef KFUSE_CODEGEN_EVALUATE_H_
#define KFUSE_CODEGEN_EVALUATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "codegen/ir.h"
#include "codegen/numeric.h"  // RoundTo(), for callers that round references.

namespace kfuse {

enum class EvalMode {
  // Every op in double; only casts (and integer results) round. Inputs are
  // rounded to their dtype first.
  kExact64,
  // Eager PyTorch: each op computes in f32 (f16/bf16 operands converted up,
  // Python scalars held in f32) and its result is rounded to the node's dtype
  // (round-to-nearest-even), as eager mode materialises every intermediate.
  // Sums accumulate in double, then round (close to PyTorch's cascade sum).
  kEager,
};

// Evaluates validated chain `c`. inputs[i] is chain input i, dense in
// row-major order of its logical shape (strides are the launcher's business);
// each output comes back the same way. symbol_values[s] is symbol s's size.
// Errors: wrong input count or size, missing symbol values, or more than
// 2^28 elements in any value (the evaluator is for test-sized data).
absl::StatusOr<std::vector<std::vector<double>>> Evaluate(
    const Chain& c, const std::vector<std::vector<double>>& inputs,
    absl::Span<const int64_t> symbol_values, EvalMode mode);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_EVALUATE_H_
