// Exact rounding of doubles to the element types, shared by validation (is a
// constant exact in its dtype?), constant folding and the reference evaluator.
//
//   RoundTo(DType::kBF16, 1.00390625);  // 1.0: round-to-nearest-even.
//   IsExactIn(DType::kF16, 70000.0);    // false: above f16's max, 65504.
#ifndef KFUSE_CODEGEN_NUMERIC_H_
#define KFUSE_CODEGEN_NUMERIC_H_

#include "core/dtype.h"

namespace kfuse {

// The value `x` takes when stored as `t`: f32/f16/bf16 round to nearest even
// (with subnormals; overflow gives infinity), i32/i64 truncate toward zero and
// saturate (NaN gives 0, as the GPU's cvt.rzi.sat), bool is x != 0, f64 is x.
double RoundTo(DType t, double x);

// True when `x` is exactly representable in `t` (NaN and infinity count as
// exact for float types only; bool takes 0 and 1 only).
bool IsExactIn(DType t, double x);

// Integer arithmetic wraps like the device's 32-bit ints.
int32_t WrapI32(int64_t v);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_NUMERIC_H_
