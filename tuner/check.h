// Is a candidate's output right? Comparison of a kernel's output against the
// float64 reference, with eager PyTorch's own error as the yardstick, so a
// fused kernel is held to the accuracy users already accept. The host
// functions here are the reference semantics; the worker computes the same
// CompareStats/PrepStats on the GPU (tuner/worker_kernels.h) and judges them
// with JudgeOutput.
//
//   std::vector<double> ref = ...;                        // reference64 output
//   ErrorStats eager = CompareToReference(DType::kBF16, eager_bytes, ref);
//   OutputCheck c = CheckOutput(DType::kBF16, cand_bytes, ref, eager, 2.0);
//   if (!c.ok) { /* kWrongResult, c.message says where */ }
#ifndef KFUSE_TUNER_CHECK_H_
#define KFUSE_TUNER_CHECK_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "core/dtype.h"

namespace kfuse {

// Byte written into every output before a candidate runs. 0xFF.. is a NaN in
// f32/f16/bf16/f64, an impossible bool, and -1 in i32/i64.
inline constexpr unsigned char kPoisonByte = 0xFF;

// Decodes `n` elements of `dtype` (f16/bf16 decoded exactly) to double.
std::vector<double> ToDouble(DType dtype, const void* data, int64_t n);
// Element i alone.
double ElementToDouble(DType dtype, const void* data, int64_t i);

// Machine epsilon of a dtype: 2^-23 f32, 2^-10 f16, 2^-7 bf16, 2^-52 f64,
// 0 for integers and bool (which must match exactly unless eager differs).
double DTypeEpsilon(DType dtype);

struct ErrorStats {
  double max_abs_err = 0;          // Over positions where both are finite.
  double max_abs_ref = 0;          // Over finite reference values.
  int64_t special_mismatches = 0;  // NaN/inf in one and not the same in the other.
  int64_t first_special_mismatch = -1;
  int64_t worst_index = -1;  // Where max_abs_err is.
  int64_t mismatched = 0;    // Positions where both are finite and differ at all.
  // 16-bit floats: positions off by more than eps(dtype) of the reference's
  // magnitude, or of 2^-10 of max_abs_ref where that is larger
  // (tuner/worker_shared_code.h kf_far), and the first of them.
  int64_t far = 0;
  int64_t first_far = -1;
};

ErrorStats CompareToReference(DType dtype, const void* data, absl::Span<const double> ref);

// The largest acceptable max-abs error for one output:
// slack * eager_max_err + 4 * eps(dtype) * max_abs_ref. The second term lets a
// candidate differ by a few roundings when eager happens to be exact.
double Tolerance(DType dtype, double eager_max_err, double max_abs_ref, double slack);

struct OutputCheck {
  bool ok = false;
  std::string message;  // Why not, or "max err 1.2e-3 (tol 4e-3)".
  double max_abs_err = 0;
};

// A candidate's output (raw bytes, poisoned before launch) passes when:
// every element was written (no poison pattern left where the reference is
// not NaN; for bool, every byte is 0 or 1); NaN and inf positions match the
// reference; for bool and integer outputs, at most slack times as many
// elements differ from the reference as differ in eager's (`eager`: eager's
// own stats against the reference), plus kFewMismatches; the max-abs
// error over finite positions is within Tolerance() of eager's; and for
// 16-bit floats, at most slack times as many elements are far from the
// reference (ErrorStats::far) as eager's, plus FewFar(n). The count
// keeps one element eager flips (a comparison on rounded values) from
// letting every other element be wrong; the far count keeps the max-abs
// tolerance, set by the largest values, from letting the small ones be
// wrong by a few percent. `name` prefixes the message.
OutputCheck CheckOutput(DType dtype, const void* data, absl::Span<const double> ref, const ErrorStats& eager,
                        double slack, const std::string& name = "output");

// Elements of a bool or integer output a candidate may get wrong beyond
// slack times eager's: where a comparison sits within a rounding of its
// threshold, contracted or reordered arithmetic may decide it otherwise.
inline constexpr int64_t kFewMismatches = 4;

// Elements of a 16-bit float output of n that may be far from the reference
// beyond slack times eager's: where an intermediate cancels, a reordered sum
// may lose a few more bits than eager's did.
inline int64_t FewFar(int64_t n) { return std::max<int64_t>(kFewMismatches, n / 1024); }

// Elements whose bytes are still the poison pattern (floats: where the
// reference is not NaN; bool: any byte not 0/1). Integers cannot be told from
// a real -1 and are left to the value comparison. Returns the first index in
// *first (if not null), or -1.
int64_t CountUnwritten(DType dtype, const void* data, absl::Span<const double> ref,
                       int64_t* first = nullptr);

// Everything a verdict on one output needs: CompareToReference's stats and
// CountUnwritten's count. What the GPU comparison returns.
struct CompareStats {
  ErrorStats err;
  int64_t unwritten = 0;
  int64_t first_unwritten = -1;
};

// CompareToReference + CountUnwritten on the host.
CompareStats CompareOnHost(DType dtype, const void* data, absl::Span<const double> ref);

// (got, want) at element i, for messages.
using ValuesAt = std::function<std::pair<double, double>(int64_t)>;

// CheckOutput's verdict from stats over `n` elements: unwritten first, then
// NaN/inf positions, then (bool, integers) the count of differing elements,
// then the max-abs error against Tolerance().
OutputCheck JudgeOutput(DType dtype, const CompareStats& s, int64_t n, const ErrorStats& eager, double slack,
                        const std::string& name, const ValuesAt& at);

// Before candidates are judged: unwritten reference elements (all bytes
// 0xFF in the f64 output), unwritten eager elements (CountUnwritten against
// the unadjusted reference), then, where eager's rounding made an inf or NaN
// the reference does not have (or the reverse), the reference takes eager's
// value so candidates are held to eager there.
struct PrepStats {
  int64_t ref_unwritten = 0;
  int64_t first_ref_unwritten = -1;
  int64_t eager_unwritten = 0;
  int64_t first_eager_unwritten = -1;
};
PrepStats PrepareReference(DType eager_dtype, const void* eager, absl::Span<double> ref);

// Float <-> 16-bit conversions (round to nearest even), used to make inputs.
uint16_t FloatToHalf(float f);
uint16_t FloatToBF16(float f);
float HalfToFloat(uint16_t h);
float BF16ToFloat(uint16_t b);

}  // namespace kfuse

#endif  // KFUSE_TUNER_CHECK_H_
