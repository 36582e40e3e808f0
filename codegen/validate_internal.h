// Helpers for messages and checks shared by Validate() and the analyses that
// name ops and shapes in their errors (partition, rows); not for other users.
#ifndef KFUSE_CODEGEN_VALIDATE_INTERNAL_H_
#define KFUSE_CODEGEN_VALIDATE_INTERNAL_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "codegen/ir.h"
#include "codegen/validate.h"

namespace kfuse::validate_internal {

// Client text for a message: quoted, at most 64 characters, escaped.
std::string Quote(absl::string_view client_text);
// "op 3 (add)" (wire index, else position among ops) or "inputs[2] (\"x\")".
std::string NodeLabel(const Chain& c, int32_t id);
// "[4,N]" (symbol names are client text: for messages only).
std::string ShapeString(const Chain& c, const std::vector<Dim>& dims);
// InvalidArgument "<label>: <field>: <what>" (field may be empty).
absl::Status Bad(const Chain& c, int32_t id, absl::string_view field, absl::string_view what);
// Unimplemented, same shape.
absl::Status Unsupported(const Chain& c, int32_t id, absl::string_view field,
                         absl::string_view what);

bool IsKnownDType(DType t);
// Supported by element-wise arithmetic (not i64/f64).
bool IsComputeDType(DType t);

// numpy broadcasting of two shapes; false when they do not broadcast.
bool Broadcast(const std::vector<Dim>& a, const std::vector<Dim>& b, std::vector<Dim>* out);

// Checks the attrs of a shape attribute (static > 0 or a known symbol).
absl::Status CheckDims(const Chain& c, int32_t id, absl::string_view field,
                       const std::vector<Dim>& dims);

// Type inference for one node whose args are already typed.
absl::Status InferElementwise(Chain& c, int32_t id);
absl::Status InferReduction(Chain& c, int32_t id);
absl::Status InferLayout(Chain& c, int32_t id);
absl::Status InferMatmul(Chain& c, int32_t id);

// The values of integer and bool nodes whose integers come from Python ints
// and bools only (weak scalars, bool tensors, sums of them): where PyTorch
// computes in i64 and element-wise kernels in i32. Check() is called for
// each node in order, after its type is inferred.
class IntegerRanges {
 public:
  explicit IntegerRanges(const Chain& c);
  // InvalidArgument naming node `id` where its values can leave i32.
  absl::Status Check(int32_t id);

 private:
  struct Interval {
    double lo, hi;
  };
  std::optional<Interval> Of(int32_t id);

  const Chain& c_;
  // nullopt: not bounded so (an i32 tensor's values, a float).
  std::vector<std::optional<Interval>> ranges_;
  std::map<int32_t, std::optional<double>> weak_;  // ExactWeakValue's memo.
};

}  // namespace kfuse::validate_internal

#endif  // KFUSE_CODEGEN_VALIDATE_INTERNAL_H_
