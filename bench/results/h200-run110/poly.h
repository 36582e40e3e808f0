// 2^t on the FMA pipe: t = j + f, j = rint(t) (by the 1.5 * 2^23 shift), |f| <= 1/2,
// 2^f by a degree-6 polynomial (relative error 1.3e-8 with these float coefficients),
// 2^j built in the exponent field. t is clamped to [-127, 128] NaN-preserving:
// -inf and t < -126.5 give 0, +inf and t >= 127.5 give inf, NaN gives NaN.
__device__ __forceinline__ float kf_ex2_poly(float t) {
  float c;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(c) : "f"(t), "f"(-127.f));
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(c) : "f"(c), "f"(128.f));
  const float k = c + 12582912.f;
  const float f = c - (k - 12582912.f);
  float p = 1.5461834846064448e-4f;
  p = fmaf(p, f, 1.3409920502454042e-3f);
  p = fmaf(p, f, 9.618057869374752e-3f);
  p = fmaf(p, f, 5.550297722220421e-2f);
  p = fmaf(p, f, 0.24022650718688965f);
  p = fmaf(p, f, 0.6931472420692444f);
  p = fmaf(p, f, 1.f);
  return p * __uint_as_float((__float_as_uint(k) << 23) + 0x3f800000u);
}
__device__ __forceinline__ float kf_exp_poly(float x) { return kf_ex2_poly(x * 1.44269504088896341f); }
