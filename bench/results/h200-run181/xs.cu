// M = 64 trial (run179): act(x @ w + bias), x [64, 8192] bf16 K-major, w
// [8192, 8192] bf16 N-major, bias [8192]. The streamed kernel's weights
// (ld.global.nc.L1::no_allocate straight into the mma operands) with x staged
// in shared memory: each warp of a CTA splitting K keeps its own cp.async
// ring of x's [64 x 32] slices (XS slots, swizzled so a half-warp's 8-byte
// reads hit 32 banks) and reads its fragments with ld.shared. The weights'
// registers form a ring of D k16 half-steps (16 registers each), refilled as
// soon as a half-step's products are issued.
// A CTA is one 64-column strip, 8 warps along K (interleaved 32-wide steps),
// summed in shared memory; bias + tanh-GELU as the generated kernel.
struct __align__(2) __kf_bf16 { unsigned short x; };
__device__ __forceinline__ float kf_bf2f(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }
__device__ __forceinline__ unsigned short kf_f2bf(float f) {
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
}
__device__ __forceinline__ float kf_tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void kf_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint4 kf_ldg_stream(const unsigned short* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void kf_cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void kf_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void kf_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ uint2 kf_lds64(unsigned addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ void kf_set(uint4& v, int i, unsigned x) {
  if (i == 0) v.x = x; else if (i == 1) v.y = x; else if (i == 2) v.z = x; else v.w = x;
}
__device__ __forceinline__ unsigned kf_word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

constexpr int M = 64, N = 8192, K = 8192, WK = 8, THREADS = 256, PITCH = 65;
constexpr int STEPS = K / 32 / WK;  // full 32-wide steps a warp: 32
constexpr int SLOT = 64 * 64;       // bytes of one x slice [64 x 32] bf16

// D: k16 half-steps of w in registers (even); XS: x slices in flight a warp.
template <int D, int XS, bool LATE>
__device__ __forceinline__ void body(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                     const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char kf_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int n0 = blockIdx.x * 64;
  const unsigned xs = (unsigned)__cvta_generic_to_shared(kf_smem) + warp * XS * SLOT;
  // Half-step t of this warp: full step t >> 1 at K (warp + 8 (t >> 1)) * 32,
  // half t & 1; lane (g, c) loads rows k0 + 16 h + 4 c + r, columns 8 g...
  const unsigned short* wp = B + (long long)(warp * 32 + 4 * c) * N + n0 + 8 * g;
  auto wload = [&](uint4 (&w)[4], int t) {
    const unsigned short* p = wp + (long long)((t >> 1) * (WK * 32) + (t & 1) * 16) * N;
#pragma unroll
    for (int r = 0; r < 4; ++r) w[r] = kf_ldg_stream(p + r * N);
  };
  // x's copies: chunk e = lane + 32 u, row e >> 2, 16-byte chunk q = e & 3.
  auto xcopy = [&](int i) {
    if (i < STEPS) {
      const unsigned dst = xs + (i % XS) * SLOT;
      const unsigned short* src = A + warp * 32 + i * (WK * 32);
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int e = lane + 32 * u, row = e >> 2, q = e & 3;
        kf_cp16(dst + row * 64 + ((q ^ (((row >> 1) & 1) << 1)) << 4), src + row * K + 8 * q);
      }
    }
    kf_commit();
  };
  // Lane's x read for (mt, half h): row mt * 8 + g, bytes 32 h + 8 c.
  const int swz = ((g >> 1) & 1) << 1;
  float acc[8][4][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][j][q] = 0.f;
  uint4 w[D][4];
#pragma unroll
  for (int i = 0; i < XS - 1; ++i) xcopy(i);
#pragma unroll
  for (int d = 0; d < D; ++d) wload(w[d], d);
  constexpr int TOTAL = 2 * STEPS;
  for (int t0 = 0; t0 < TOTAL; t0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int t = t0 + d;
      if (t < TOTAL) {
        const int i = t >> 1, h = d & 1;  // D even: t & 1 == d & 1
        if (h == 0) {
          kf_wait<XS - 2>();
          __syncwarp();
          xcopy(i + XS - 1);
        }
        const unsigned xsl = xs + (i % XS) * SLOT + g * 64 + (((2 * h + (c >> 1)) ^ swz) << 4) + 8 * (c & 1);
        unsigned a[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const unsigned r0 = kf_word(w[d][0], j), r1 = kf_word(w[d][1], j);
          const unsigned r2 = kf_word(w[d][2], j), r3 = kf_word(w[d][3], j);
          a[j][0] = __byte_perm(r0, r1, 0x5410);
          a[j][1] = __byte_perm(r0, r1, 0x7632);
          a[j][2] = __byte_perm(r2, r3, 0x5410);
          a[j][3] = __byte_perm(r2, r3, 0x7632);
        }
        if (!LATE && t + D < TOTAL) wload(w[d], t + D);
#pragma unroll
        for (int mt = 0; mt < 8; ++mt) {
          const uint2 xv = kf_lds64(xsl + mt * 8 * 64);
#pragma unroll
          for (int j = 0; j < 4; ++j) kf_mma(acc[mt][j], a[j], xv.x, xv.y);
        }
        if (LATE && t + D < TOTAL) wload(w[d], t + D);
      }
    }
  }
  kf_wait<0>();
  __syncthreads();
  float* const red = reinterpret_cast<float*>(kf_smem);
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        red[(warp * 64 + mt * 8 + 2 * c + (q & 1)) * PITCH + 8 * g + 2 * j + (q >> 1)] = acc[mt][j][q];
  __syncthreads();
  for (int idx = tid; idx < 64 * 32; idx += THREADS) {
    const int ml = idx / 32, nl = 2 * (idx % 32);
    float t0 = 0.f, t1 = 0.f;
#pragma unroll
    for (int wk = 0; wk < WK; ++wk) {
      t0 += red[(wk * 64 + ml) * PITCH + nl];
      t1 += red[(wk * 64 + ml) * PITCH + nl + 1];
    }
    const int ec = n0 + nl;
    float v[2] = {t0 + kf_bf2f(bias[ec]), t1 + kf_bf2f(bias[ec + 1])};
#pragma unroll
    for (int e = 0; e < 2; ++e)
      v[e] = 0.5f * v[e] * (1.f + kf_tanh_approx(0.7978845608f * (v[e] + 0.044715f * v[e] * v[e] * v[e])));
    const unsigned pk = kf_f2bf(v[0]) | ((unsigned)kf_f2bf(v[1]) << 16);
    *reinterpret_cast<unsigned*>(out + (long long)ml * N + ec) = pk;
  }
}


// Ping-pong: two register buffers of B half-steps. Every weight load shares
// one scoreboard and the first use of any of them waits for all in flight
// (xs.sass), so a buffer is permuted into mma operands (its wait) before the
// other buffer's loads are issued, and its products overlap those loads.
template <int B, int XS, bool DEP, bool NOMMA = false, bool NOX = false>
__device__ __forceinline__ void body_pp(const unsigned short* __restrict__ A, const unsigned short* __restrict__ Bw,
                                        const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char kf_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int n0 = blockIdx.x * 64;
  const unsigned xs = (unsigned)__cvta_generic_to_shared(kf_smem) + warp * XS * SLOT;
  const unsigned short* wp = Bw + (long long)(warp * 32 + 4 * c) * N + n0 + 8 * g;
  auto wload = [&](uint4 (&w)[4], int t, unsigned dep) {
    const unsigned short* p = wp + (long long)((t >> 1) * (WK * 32) + (t & 1) * 16) * N + dep;
#pragma unroll
    for (int r = 0; r < 4; ++r) w[r] = kf_ldg_stream(p + r * N);
  };
  auto xcopy = [&](int i) {
    if (!NOX && i < STEPS) {
      const unsigned dst = xs + (i % XS) * SLOT;
      const unsigned short* src = A + warp * 32 + i * (WK * 32);
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int e = lane + 32 * u, row = e >> 2, q = e & 3;
        kf_cp16(dst + row * 64 + ((q ^ (((row >> 1) & 1) << 1)) << 4), src + row * K + 8 * q);
      }
    }
    kf_commit();
  };
  const int swz = ((g >> 1) & 1) << 1;
  float acc[8][4][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][j][q] = 0.f;
  uint4 w[2][B][4];
  unsigned a[B][4][4];
  // z is 0, but ptxas cannot know it: an address or selector plus (v & z)
  // waits for v, which pins the order the ping-pong needs.
  const unsigned z = DEP ? (unsigned)(reinterpret_cast<unsigned long long>(bias) >> 63) : 0u;
  auto permute = [&](const uint4 (&src)[B][4], unsigned dep) {
    const unsigned lo = 0x5410u + dep, hi = 0x7632u + dep;
#pragma unroll
    for (int b = 0; b < B; ++b)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned r0 = kf_word(src[b][0], j), r1 = kf_word(src[b][1], j);
        const unsigned r2 = kf_word(src[b][2], j), r3 = kf_word(src[b][3], j);
        a[b][j][0] = __byte_perm(r0, r1, lo);
        a[b][j][1] = __byte_perm(r0, r1, hi);
        a[b][j][2] = __byte_perm(r2, r3, lo);
        a[b][j][3] = __byte_perm(r2, r3, hi);
      }
  };
  // The products of half-steps t0 .. t0 + B - 1 from a.
  auto products = [&](int t0) {
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int t = t0 + b, i = t >> 1, h = t & 1;
      if (h == 0) {
        kf_wait<XS - 2>();
        __syncwarp();
        xcopy(i + XS - 1);
      }
      const unsigned xsl = xs + (i % XS) * SLOT + g * 64 + (((2 * h + (c >> 1)) ^ swz) << 4) + 8 * (c & 1);
      if (NOMMA) {
        // The stream alone (outputs wrong): the operands folded into one sum.
        unsigned v = kf_lds64(xsl).x;
#pragma unroll
        for (int j = 0; j < 4; ++j) v ^= a[b][j][0] ^ a[b][j][1] ^ a[b][j][2] ^ a[b][j][3];
        acc[7][3][3] += __uint_as_float(v & 0x3fffffffu);
        continue;
      }
#pragma unroll
      for (int mt = 0; mt < 8; ++mt) {
        const uint2 xv = kf_lds64(xsl + mt * 8 * 64);
#pragma unroll
        for (int j = 0; j < 4; ++j) kf_mma(acc[mt][j], a[b][j], xv.x, xv.y);
      }
    }
  };
  auto issue = [&](uint4 (&dst)[B][4], int t0, unsigned dep) {
#pragma unroll
    for (int b = 0; b < B; ++b) wload(dst[b], t0 + b, dep);
  };
  auto opaque_and = [&](unsigned v) {
    unsigned d;
    asm volatile("and.b32 %0, %1, %2;" : "=r"(d) : "r"(v), "r"(z));
    return d;
  };
  // Every operand, so that none of the permutes (each waiting on the loads)
  // can be left until after the next loads.
  auto after_a = [&] {
    unsigned v = 0;
#pragma unroll
    for (int b = 0; b < B; ++b)
#pragma unroll
      for (int j = 0; j < 4; ++j) v ^= a[b][j][0] ^ a[b][j][1] ^ a[b][j][2] ^ a[b][j][3];
    return opaque_and(v);
  };
  auto after_acc = [&] { return opaque_and(__float_as_uint(acc[7][3][3])); };
  constexpr int TOTAL = 2 * STEPS;
  static_assert(TOTAL % (2 * B) == 0 && B % 2 == 0, "whole steps a buffer");
#pragma unroll
  for (int i = 0; i < XS - 1; ++i) xcopy(i);
  issue(w[0], 0, 0);
  for (int t0 = 0; t0 < TOTAL; t0 += 2 * B) {
    permute(w[0], after_acc());
    issue(w[1], t0 + B, after_a());
    products(t0);
    permute(w[1], after_acc());
    if (t0 + 2 * B < TOTAL) issue(w[0], t0 + 2 * B, after_a());
    products(t0 + B);
  }
  kf_wait<0>();
  __syncthreads();
  float* const red = reinterpret_cast<float*>(kf_smem);
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        red[(warp * 64 + mt * 8 + 2 * c + (q & 1)) * PITCH + 8 * g + 2 * j + (q >> 1)] = acc[mt][j][q];
  __syncthreads();
  for (int idx = tid; idx < 64 * 32; idx += THREADS) {
    const int ml = idx / 32, nl = 2 * (idx % 32);
    float t0 = 0.f, t1 = 0.f;
#pragma unroll
    for (int wk = 0; wk < WK; ++wk) {
      t0 += red[(wk * 64 + ml) * PITCH + nl];
      t1 += red[(wk * 64 + ml) * PITCH + nl + 1];
    }
    const int ec = n0 + nl;
    float v[2] = {t0 + kf_bf2f(bias[ec]), t1 + kf_bf2f(bias[ec + 1])};
#pragma unroll
    for (int e = 0; e < 2; ++e)
      v[e] = 0.5f * v[e] * (1.f + kf_tanh_approx(0.7978845608f * (v[e] + 0.044715f * v[e] * v[e] * v[e])));
    const unsigned pk = kf_f2bf(v[0]) | ((unsigned)kf_f2bf(v[1]) << 16);
    *reinterpret_cast<unsigned*>(out + (long long)ml * N + ec) = pk;
  }
}
// In place (ip): the ping-pong with each buffer permuted where it lies, so two
// buffers of B half-steps and no operand copy.
// Ping-pong: two register buffers of B half-steps. Every weight load shares
// one scoreboard and the first use of any of them waits for all in flight
// (xs.sass), so a buffer is permuted into mma operands (its wait) before the
// other buffer's loads are issued, and its products overlap those loads.
template <int B, int XS, bool DEP, bool NOMMA = false, bool NOX = false>
__device__ __forceinline__ void body_ip(const unsigned short* __restrict__ A, const unsigned short* __restrict__ Bw,
                                        const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char kf_smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int n0 = blockIdx.x * 64;
  const unsigned xs = (unsigned)__cvta_generic_to_shared(kf_smem) + warp * XS * SLOT;
  const unsigned short* wp = Bw + (long long)(warp * 32 + 4 * c) * N + n0 + 8 * g;
  auto wload = [&](uint4 (&w)[4], int t, unsigned dep) {
    const unsigned short* p = wp + (long long)((t >> 1) * (WK * 32) + (t & 1) * 16) * N + dep;
#pragma unroll
    for (int r = 0; r < 4; ++r) w[r] = kf_ldg_stream(p + r * N);
  };
  auto xcopy = [&](int i) {
    if (!NOX && i < STEPS) {
      const unsigned dst = xs + (i % XS) * SLOT;
      const unsigned short* src = A + warp * 32 + i * (WK * 32);
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int e = lane + 32 * u, row = e >> 2, q = e & 3;
        kf_cp16(dst + row * 64 + ((q ^ (((row >> 1) & 1) << 1)) << 4), src + row * K + 8 * q);
      }
    }
    kf_commit();
  };
  const int swz = ((g >> 1) & 1) << 1;
  constexpr int TOTAL = 2 * STEPS;
  float acc[8][4][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][j][q] = 0.f;
  uint4 w[2][B][4];
  // z is 0, but ptxas cannot know it: an address or selector plus (v & z)
  // waits for v, which pins the order the ping-pong needs.
  const unsigned z = DEP ? (unsigned)(reinterpret_cast<unsigned long long>(bias) >> 63) : 0u;
  auto permute = [&](uint4 (&src)[B][4], unsigned dep) {
    const unsigned lo = 0x5410u + dep, hi = 0x7632u + dep;
#pragma unroll
    for (int b = 0; b < B; ++b)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned r0 = kf_word(src[b][0], j), r1 = kf_word(src[b][1], j);
        const unsigned r2 = kf_word(src[b][2], j), r3 = kf_word(src[b][3], j);
        const unsigned p0 = __byte_perm(r0, r1, lo), p1 = __byte_perm(r0, r1, hi);
        const unsigned p2 = __byte_perm(r2, r3, lo), p3 = __byte_perm(r2, r3, hi);
        kf_set(src[b][0], j, p0);
        kf_set(src[b][1], j, p1);
        kf_set(src[b][2], j, p2);
        kf_set(src[b][3], j, p3);
      }
  };
  // The products of half-steps t0 .. t0 + B - 1 from a.
  auto products = [&](const uint4 (&a)[B][4], int t0) {
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int t = t0 + b, i = t >> 1, h = t & 1;
      if (t >= TOTAL) break;
      if (h == 0) {
        kf_wait<XS - 2>();
        __syncwarp();
        xcopy(i + XS - 1);
      }
      const unsigned xsl = xs + (i % XS) * SLOT + g * 64 + (((2 * h + (c >> 1)) ^ swz) << 4) + 8 * (c & 1);
      if (NOMMA) {
        // The stream alone (outputs wrong): the operands folded into one sum.
        unsigned v = kf_lds64(xsl).x;
#pragma unroll
        for (int j = 0; j < 4; ++j) v ^= kf_word(a[b][0], j) ^ kf_word(a[b][1], j) ^ kf_word(a[b][2], j) ^ kf_word(a[b][3], j);
        acc[7][3][3] += __uint_as_float(v & 0x3fffffffu);
        continue;
      }
#pragma unroll
      for (int mt = 0; mt < 8; ++mt) {
        const uint2 xv = kf_lds64(xsl + mt * 8 * 64);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const unsigned f[4] = {kf_word(a[b][0], j), kf_word(a[b][1], j), kf_word(a[b][2], j), kf_word(a[b][3], j)};
          kf_mma(acc[mt][j], f, xv.x, xv.y);
        }
      }
    }
  };
  auto issue = [&](uint4 (&dst)[B][4], int t0, unsigned dep) {
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (t0 + b < TOTAL) wload(dst[b], t0 + b, dep);
  };
  auto opaque_and = [&](unsigned v) {
    unsigned d;
    asm volatile("and.b32 %0, %1, %2;" : "=r"(d) : "r"(v), "r"(z));
    return d;
  };
  // Every operand, so that none of the permutes (each waiting on the loads)
  // can be left until after the next loads.
  auto after_a = [&](const uint4 (&a)[B][4]) {
    unsigned v = 0;
#pragma unroll
    for (int b = 0; b < B; ++b)
#pragma unroll
      for (int q = 0; q < 4; ++q) v ^= a[b][q].x ^ a[b][q].y ^ a[b][q].z ^ a[b][q].w;
    return opaque_and(v);
  };
  auto after_acc = [&] { return opaque_and(__float_as_uint(acc[7][3][3])); };
  static_assert(B % 2 == 0 || B == 3, "whole steps a buffer");
#pragma unroll
  for (int i = 0; i < XS - 1; ++i) xcopy(i);
  issue(w[0], 0, 0);
  for (int t0 = 0; t0 < TOTAL; t0 += 2 * B) {
    permute(w[0], after_acc());
    issue(w[1], t0 + B, after_a(w[0]));
    products(w[0], t0);
    permute(w[1], after_acc());
    issue(w[0], t0 + 2 * B, after_a(w[1]));
    products(w[1], t0 + B);
  }
  kf_wait<0>();
  __syncthreads();
  float* const red = reinterpret_cast<float*>(kf_smem);
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        red[(warp * 64 + mt * 8 + 2 * c + (q & 1)) * PITCH + 8 * g + 2 * j + (q >> 1)] = acc[mt][j][q];
  __syncthreads();
  for (int idx = tid; idx < 64 * 32; idx += THREADS) {
    const int ml = idx / 32, nl = 2 * (idx % 32);
    float t0 = 0.f, t1 = 0.f;
#pragma unroll
    for (int wk = 0; wk < WK; ++wk) {
      t0 += red[(wk * 64 + ml) * PITCH + nl];
      t1 += red[(wk * 64 + ml) * PITCH + nl + 1];
    }
    const int ec = n0 + nl;
    float v[2] = {t0 + kf_bf2f(bias[ec]), t1 + kf_bf2f(bias[ec + 1])};
#pragma unroll
    for (int e = 0; e < 2; ++e)
      v[e] = 0.5f * v[e] * (1.f + kf_tanh_approx(0.7978845608f * (v[e] + 0.044715f * v[e] * v[e] * v[e])));
    const unsigned pk = kf_f2bf(v[0]) | ((unsigned)kf_f2bf(v[1]) << 16);
    *reinterpret_cast<unsigned*>(out + (long long)ml * N + ec) = pk;
  }
}
#define KF_IP(B, NOMMA)                                                                               \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                            \
      kf_ip_b##B##_n##NOMMA(const unsigned short* __restrict__ A, const unsigned short* __restrict__ W, \
                            const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) { \
    body_ip<B, 4, true, NOMMA>(A, W, bias, out);                                                      \
  }
KF_IP(2, 0)
KF_IP(3, 0)
KF_IP(4, 0)
KF_IP(3, 1)
KF_IP(4, 1)
#define KF_PP(B, XS, D)                                                                                  \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                            \
      kf_pp_b##B##_x##XS##_d##D(const unsigned short* __restrict__ A, const unsigned short* __restrict__ W, \
                         const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {  \
    body_pp<B, XS, D>(A, W, bias, out);                                                                  \
  }
KF_PP(2, 4, 0)
KF_PP(2, 4, 1)
KF_PP(2, 3, 1)
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    kf_pp_nomma(const unsigned short* __restrict__ A, const unsigned short* __restrict__ W,
                const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {
  body_pp<2, 4, true, true>(A, W, bias, out);
}
// Probes (outputs wrong by design): no copies of x, with and without products.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    kf_pp_nox(const unsigned short* __restrict__ A, const unsigned short* __restrict__ W,
              const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {
  body_pp<2, 4, true, false, true>(A, W, bias, out);
}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    kf_pp_nomma_nox(const unsigned short* __restrict__ A, const unsigned short* __restrict__ W,
                    const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {
  body_pp<2, 4, true, true, true>(A, W, bias, out);
}

#define KF_ENTRY(D, XS, L)                                                                               \
  extern "C" __global__ void __launch_bounds__(THREADS, 1)                                            \
      kf_xs_d##D##_x##XS##_l##L(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, \
                         const unsigned short* __restrict__ bias, unsigned short* __restrict__ out) {  \
    body<D, XS, L>(A, B, bias, out);                                                                     \
  }
KF_ENTRY(2, 3, 0)
KF_ENTRY(2, 4, 0)
KF_ENTRY(4, 3, 0)
KF_ENTRY(4, 4, 0)
KF_ENTRY(6, 4, 0)
KF_ENTRY(2, 4, 1)
KF_ENTRY(4, 4, 1)
KF_ENTRY(6, 4, 1)
