#include "codegen/cuda_prelude.h"

namespace kfuse {
namespace {

// Double to float rounding to odd (truncate, then set the last bit when
// inexact), so a second rounding to f16/bf16 is correctly rounded: the
// reference's explicit casts must not round twice.
constexpr char kDoubleToOdd[] = R"(__device__ __forceinline__ float kf_d2f_odd(double d) {
  float f;
  asm("cvt.rz.f32.f64 %0, %1;" : "=f"(f) : "d"(d));
  if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
  return f;
}
)";

constexpr char kHalf[] = R"(struct __align__(2) __kf_half { unsigned short x; };
__device__ __forceinline__ float kf_h2f(__kf_half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x));
  return f;
}
__device__ __forceinline__ __kf_half kf_f2h(float f) {
  __kf_half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f));
  return h;
}
__device__ __forceinline__ float kf_rh(float f) { return kf_h2f(kf_f2h(f)); }
)";
constexpr char kHalfF64[] =
    "__device__ __forceinline__ double kf_rh(double d) { return (double)kf_rh(kf_d2f_odd(d)); }\n";

// bf16 -> f32 is a shift; f32 -> bf16 rounds to nearest even and keeps NaN a
// NaN, in one instruction (every target is sm_80 or later).
constexpr char kBf16[] = R"(struct __align__(2) __kf_bf16 { unsigned short x; };
__device__ __forceinline__ float kf_bf2f(__kf_bf16 b) {
  return __uint_as_float(((unsigned int)b.x) << 16);
}
__device__ __forceinline__ __kf_bf16 kf_f2bf(float f) {
  __kf_bf16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.x) : "f"(f));
  return b;
}
__device__ __forceinline__ float kf_rbf(float f) { return kf_bf2f(kf_f2bf(f)); }
)";
constexpr char kBf16F64[] =
    "__device__ __forceinline__ double kf_rbf(double d) { return (double)kf_rbf(kf_d2f_odd(d)); }\n";

constexpr char kVec[] = R"(template <typename T, int N>
struct alignas(sizeof(T) * N) kf_vec { T v[N]; };
)";

// A vector of 4, 8 or 16 bytes read where it may lie off its alignment (a
// row that starts off the dense rows' phase, a slice at an odd offset): the
// aligned units holding its first and last bytes (kf_win_at), each read
// whole, and the bytes between funnel-shifted out of them (kf_win; for 16
// bytes 11 selects and 4 shifts). Each aligned read holds a byte of the
// vector asked for, so neither reaches memory outside the 16-byte units the
// tensor touches. The addresses stay pointers, so a window into shared
// memory loads from it as such.
constexpr char kWindow[] = R"(template <int N>
struct alignas(N) kf_words { unsigned u[N / 4]; };
template <int N>
__device__ __forceinline__ unsigned kf_win_at(const void* p, const kf_words<N>** lo,
                                              const kf_words<N>** hi) {
  static_assert(N == 4 || N == 8 || N == 16, "windows read 4, 8 or 16 bytes");
  const char* c = static_cast<const char*>(p);
  const unsigned s = static_cast<unsigned>(reinterpret_cast<unsigned long long>(c)) & (N - 1);
  *lo = reinterpret_cast<const kf_words<N>*>(c - s);
  *hi = reinterpret_cast<const kf_words<N>*>(c + (N - 1) - ((s + N - 1) & (N - 1)));
  return s;
}
template <typename T, int N>
__device__ __forceinline__ T kf_win(const kf_words<N>& x, const kf_words<N>& y, unsigned s) {
  constexpr int K = N / 4;
  unsigned w[2 * K];
#pragma unroll
  for (int i = 0; i < K; ++i) {
    w[i] = x.u[i];
    w[K + i] = y.u[i];
  }
  const unsigned q = s >> 2, r = (s & 3) * 8;
  if constexpr (K == 4) {
#pragma unroll
    for (int i = 0; i < K + 2; ++i) w[i] = (q & 2) ? w[i + 2] : w[i];
  }
  if constexpr (K >= 2) {
#pragma unroll
    for (int i = 0; i < K + 1; ++i) w[i] = (q & 1) ? w[i + 1] : w[i];
  }
  T v;
  unsigned* o = reinterpret_cast<unsigned*>(&v);
#pragma unroll
  for (int i = 0; i < K; ++i) o[i] = __funnelshift_r(w[i], w[i + 1], r);
  return v;
}
template <typename T>
__device__ __forceinline__ T kf_ldw(const void* p) {
  constexpr int N = sizeof(T);
  const kf_words<N>* lo;
  const kf_words<N>* hi;
  const unsigned s = kf_win_at<N>(p, &lo, &hi);
  return kf_win<T, N>(*lo, *hi, s);
}
)";

// torch.maximum / torch.minimum: NaN in either operand gives NaN (for float,
// one instruction on sm_80 and later, every target's).
constexpr char kMinMax[] = R"(__device__ __forceinline__ float kf_max(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float kf_min(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ double kf_max(double a, double b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ double kf_min(double a, double b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ int kf_max(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int kf_min(int a, int b) { return a < b ? a : b; }
)";

// The same for i64 (kernels with i64 arithmetic only).
constexpr char kMinMax64[] = R"(__device__ __forceinline__ long long kf_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long kf_min(long long a, long long b) { return a < b ? a : b; }
)";

// PyTorch's integer pow: wraps on overflow; a negative exponent gives 0
// except for bases 1 and -1.
constexpr char kIpow[] = R"(__device__ __forceinline__ int kf_ipow(int b, int e) {
  if (e < 0) return b == 1 ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
  unsigned int r = 1u, x = (unsigned int)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return (int)r;
}
)";
constexpr char kIpow64[] = R"(__device__ __forceinline__ long long kf_ipow(long long b, long long e) {
  if (e < 0) return b == 1 ? 1 : (b == -1 ? ((e & 1) ? -1 : 1) : 0);
  unsigned long long r = 1ull, x = (unsigned long long)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return (long long)r;
}
)";

// Max relative error about 2^-11: used for bf16 nodes only.
// sin/cos for f16/bf16 nodes: the MUFU instruction where its error (about
// 2^-21 absolute for |x| <= 2^10) is far under the dtype's rounding, the
// accurate function, kept out of line, elsewhere. Out of line because its
// Payne-Hanek slow path, inlined into every unrolled element, tripled NVRTC
// time (1.4 s against 0.45 s for the 10-op bf16 chain).
constexpr char kSinCosFast[] = R"(__device__ __noinline__ float kf_sin_slow(float x) { return sinf(x); }
__device__ __noinline__ float kf_cos_slow(float x) { return cosf(x); }
__device__ __forceinline__ float kf_sin(float x) {
  return fabsf(x) <= 0x1p+10f ? __sinf(x) : kf_sin_slow(x);
}
__device__ __forceinline__ float kf_cos(float x) {
  return fabsf(x) <= 0x1p+10f ? __cosf(x) : kf_cos_slow(x);
}
)";

// The accurate sin, cos and pow as calls, for chains with many of them:
// inlined, each brings its slow path (Payne-Hanek reduction, pow's
// double-float log) into every unrolled element, and NVRTC's time and memory
// grow with them (32 chained f32 sins: 10 s and a 396 KiB cubin; 512: about
// ten minutes and 16 GB). Unused ones are dropped by the compiler.
constexpr char kOutlinedMath[] = R"(__device__ __noinline__ float kf_sinf_ol(float x) { return sinf(x); }
__device__ __noinline__ float kf_cosf_ol(float x) { return cosf(x); }
__device__ __noinline__ float kf_powf_ol(float x, float y) { return powf(x, y); }
__device__ __noinline__ double kf_sin_ol(double x) { return sin(x); }
__device__ __noinline__ double kf_cos_ol(double x) { return cos(x); }
__device__ __noinline__ double kf_pow_ol(double x, double y) { return pow(x, y); }
)";

constexpr char kTanhApprox[] = R"(__device__ __forceinline__ float kf_tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
)";

// exp for f16/bf16 results under kFast: ex2.approx of x * log2(e), results
// below f32's normal range flushed to zero (__expf without the subnormal
// fix-up, which costs three more instructions an element).
constexpr char kExpFast[] = R"(__device__ __forceinline__ float kf_exp_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
  return y;
}
)";

// (a * b) * c with one rounding: a * b = p + e exactly (e by an fma), and
// p * c + e * c is rounded once; e * c's own rounding is 2^-24 of the
// result's ulp. Where e * c is not finite (an infinite or NaN factor, a
// product that overflowed, or 0 times infinity) the plain product gives the
// special value, as eager's two roundings do.
constexpr char kMul3[] = R"(__device__ __forceinline__ float kf_mul3(float a, float b, float c) {
  const float p = a * b;
  const float q = __fmaf_rn(a, b, -p) * c;
  return fabsf(q) <= 3.402823466e38f ? __fmaf_rn(p, c, q) : p * c;
}
)";

// A cluster of blocks (sm_90): the block's rank, the cluster-wide barrier
// (arrive with release, wait with acquire: writes to shared memory before
// the arrive are seen by every block after the wait) and a load from
// another block's shared memory at the address of `p` in this one.
constexpr char kCluster[] = R"(__device__ __forceinline__ unsigned kf_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void kf_cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void kf_cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
template <typename V>
__device__ __forceinline__ V kf_cluster_ld(V* p, unsigned rank) {
  unsigned long long g;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(g) : "l"(p), "r"(rank));
  return *reinterpret_cast<volatile V*>(g);
}
)";

}  // namespace

std::string CudaPrelude(const PreludeNeeds& needs) {
  std::string s;
  const bool f64 = needs.round_f64 && (needs.half || needs.bf16);
  if (f64) s += kDoubleToOdd;
  if (needs.half) s += kHalf;
  if (needs.half && f64) s += kHalfF64;
  if (needs.bf16) s += kBf16;
  if (needs.bf16 && f64) s += kBf16F64;
  if (needs.vec) s += kVec;
  if (needs.vec && needs.window) s += kWindow;
  if (needs.minmax) s += kMinMax;
  if (needs.minmax64) s += kMinMax64;
  if (needs.ipow) s += kIpow;
  if (needs.ipow64) s += kIpow64;
  if (needs.tanh_approx) s += kTanhApprox;
  if (needs.sincos_fast) s += kSinCosFast;
  if (needs.outlined_math) s += kOutlinedMath;
  if (needs.exp_fast) s += kExpFast;
  if (needs.mul3) s += kMul3;
  if (needs.cluster) s += kCluster;
  return s;
}

}  // namespace kfuse
