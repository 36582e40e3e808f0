// Variants of the tuned bf16 RMSNorm 8192 kernel (512 threads, two 16-byte
// vectors a thread): PACK outputs by cvt.rn.bf16x2.f32; WFIRST loads the
// weight before the reduction; RAW holds the row as bf16, converted where used.
__device__ __forceinline__ unsigned kf_pack2(float lo, float hi) {
  unsigned u; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo)); return u;
}
__global__ void __launch_bounds__(512, 4) kf_entry(const __kf_bf16* __restrict__ in0, const __kf_bf16* __restrict__ in1, __kf_bf16* __restrict__ out0) {
  const long long kf_W = 8192LL;
  const int kf_lane = threadIdx.x;
  const long long kf_b0 = (long long)blockIdx.x * 8192LL;
  kf_vec<__kf_bf16, 8> raw[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) raw[i] = *reinterpret_cast<const kf_vec<__kf_bf16, 8>*>(in0 + kf_b0 + (i * 512 + kf_lane) * 8);
#if WFIRST
  kf_vec<__kf_bf16, 8> wr[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) wr[i] = *reinterpret_cast<const kf_vec<__kf_bf16, 8>*>(in1 + (i * 512 + kf_lane) * 8);
#endif
#if !RAW
  float x0[16];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) x0[i * 8 + e] = kf_bf2f(raw[i].v[e]);
#define X(i, e) x0[(i) * 8 + (e)]
#else
#define X(i, e) kf_bf2f(raw[i].v[e])
#endif
  float a3 = 0;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) { float y; kf_phase1(X(i, e), y); a3 += y; }
  __shared__ float kf_buf3[16];
  const float r3 = kf_team_reduce<512>(a3, kf_buf3, kf_sum_op()) / (float)kf_W;
  const float r5 = (r3 + 0x1p-20f);
  const float r6 = __frsqrt_rn(r5);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const long long kf_c = (i * 512 + kf_lane) * 8;
#if !WFIRST
    const kf_vec<__kf_bf16, 8> w = *reinterpret_cast<const kf_vec<__kf_bf16, 8>*>(in1 + kf_c);
#else
    const kf_vec<__kf_bf16, 8> w = wr[i];
#endif
    float ys[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) kf_out(X(i, e), kf_bf2f(w.v[e]), r6, ys[e]);
#if PACK
    uint4 o;
    o.x = kf_pack2(ys[0], ys[1]); o.y = kf_pack2(ys[2], ys[3]); o.z = kf_pack2(ys[4], ys[5]); o.w = kf_pack2(ys[6], ys[7]);
    *reinterpret_cast<uint4*>(out0 + kf_b0 + kf_c) = o;
#else
    kf_vec<__kf_bf16, 8> o;
#pragma unroll
    for (int e = 0; e < 8; ++e) o.v[e] = kf_f2bf(ys[e]);
    *reinterpret_cast<kf_vec<__kf_bf16, 8>*>(out0 + kf_b0 + kf_c) = o;
#endif
  }
}
#undef X
#undef PACK
#undef WFIRST
#undef RAW
