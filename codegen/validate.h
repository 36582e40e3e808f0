// Validate() is the one gate between client input and the generators: it
// checks a raw chain's structure and limits, and infers every node's type and
// shape with numpy broadcasting and PyTorch type promotion.
//
//   Chain c;
//   int x = c.AddInput(TensorType{DType::kBF16, {Dim::Static(4), Dim::Static(8)}});
//   c.outputs.push_back(c.AddOp(OpKind::kMul, {x, c.AddConstant(2)}));
//   absl::StatusOr<Chain> typed = Validate(c);  // %2 : bf16[4,8]
//
// Errors are InvalidArgument (Unimplemented for i64/f64 arithmetic) and name
// the node: "op 3 (add): args[1]: shapes [4,3] and [5] do not broadcast".
#ifndef KFUSE_CODEGEN_VALIDATE_H_
#define KFUSE_CODEGEN_VALIDATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kfuse {

struct Limits {
  int max_ops = 512;  // Nodes other than inputs.
  int max_inputs = 64;
  int max_outputs = 64;
  int max_rank = 8;
  int64_t max_elements = int64_t{1} << 40;  // Symbolic dims count at their max.
  int max_symbols = 64;
  // Concat operands over the whole chain. Each is a guarded load and a
  // select arm in one kernel, and NVRTC's time grows faster than their count
  // (64: 0.4 s, 256: 5 s, 1024: 104 s).
  int max_concat_operands = 128;
  // Input, output and symbol names (client text, echoed in every plan and
  // in errors): bytes each.
  int max_name_bytes = 1024;
};

// Returns `raw` with every non-input node's `type` set, reduction and permute
// axes normalised (non-negative, sorted for reductions), slice bounds clamped
// as Python does (step >= 1), and weak float constants held in f32. Inputs
// must be the first nodes, in input_index order.
//
// Weak scalars: a kConstant without dtype is a Python scalar. Its type.dtype
// is i32 for an integral value (|v| < 2^31, not -0.0), else f32; it and any
// element-wise result computed only from weak scalars promote like PyTorch's
// wrapped numbers; rank-0 strong values like zero-dim tensors.
absl::StatusOr<Chain> Validate(Chain raw, const Limits& limits = {});

// Elements of `dims` with symbolic dims at their max (1 when unbounded),
// saturating at limit + 1: no product overflows.
int64_t CountElements(const Chain& c, const std::vector<Dim>& dims, int64_t limit);
// The same with symbol s at sizes[s].
int64_t CountElementsAt(const std::vector<Dim>& dims, const std::vector<int64_t>& sizes, int64_t limit);

// For a validated chain: true when `node` is a weak (Python) scalar.
bool IsWeakScalar(const Chain& validated, int32_t node);

// For a validated element-wise node: the dtype its operands are converted to
// before computing (PyTorch's common dtype; f32 for float functions and true
// division of integers; for comparisons the promoted operand type, for
// logical ops bool, for where the result type, for cast the source type).
// Generators compute f16/bf16 in f32 on top of this.
DType ComputeDType(const Chain& validated, int32_t node);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_VALIDATE_H_
