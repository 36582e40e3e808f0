// Few rows over all 132 SMs: x [16, 8192] @ w [8192, N] + bias, tanh-GELU,
// bf16. The generated streamed kernel (g16.cu, matmul/7) runs 128 CTAs of one
// 64-column strip each, so 4 of the 132 SMs idle. Questions:
//  (1) is the stream per-SM bound? The same kernel code over 132 strips
//      (N = 8448, 132 CTAs) should take the 128-strip time if so;
//  (2) stream-K: 132 CTAs each taking 1/132 of the (strip, 32-row step)
//      space, the strips cut between CTAs summed through a workspace in a
//      fixed order by whichever contributor arrives last (a ticket a strip,
//      reset by that CTA), so no spin and a deterministic result.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <functional>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
namespace g16 {
#include "g16.cu"
}
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
typedef unsigned short u16;
constexpr int M = 16, K = 8192, STEPS = K / 32, MT = 2;

__device__ __forceinline__ uint4 ldg_stream(const u16* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ldg_cached(const u16* p) {
  uint4 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ void mma(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void step(float (&acc)[MT][4][4], const uint4 (&w)[8], const uint4 (&x)[MT]) {
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      unsigned a[4];
      const unsigned r0 = word(w[4 * s], j), r1 = word(w[4 * s + 1], j);
      const unsigned r2 = word(w[4 * s + 2], j), r3 = word(w[4 * s + 3], j);
      a[0] = __byte_perm(r0, r1, 0x5410);
      a[1] = __byte_perm(r0, r1, 0x7632);
      a[2] = __byte_perm(r2, r3, 0x5410);
      a[3] = __byte_perm(r2, r3, 0x7632);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const unsigned b[2] = {word(x[mt], 2 * s), word(x[mt], 2 * s + 1)};
        mma(acc[mt][j], a, b);
      }
    }
}
__device__ __forceinline__ float bf2f(u16 b) { return __uint_as_float(((unsigned)b) << 16); }
__device__ __forceinline__ u16 f2bf(float f) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ float gelu(float v) {
  float t;
  const float z = 0x1.988454p-1f * (v + 0x1.6e4e26p-5f * (v * v * v));
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(z));
  return 0x1p-1f * v * (0x1p+0f + t);
}
// Which CTA holds unit u when U units are cut into P ranges [U b / P, U (b + 1) / P).
__device__ __forceinline__ int owner(long long u, int U, int P) {
  int b = (int)((u * P) / U);
  while ((long long)U * (b + 1) / P <= u) ++b;
  while ((long long)U * b / P > u) --b;
  return b;
}
constexpr int PITCH = 65, SLOTS = 3;
// STRIPS 64-column strips (N = 64 STRIPS, w's rows N apart); P CTAs.
// MATH false: the loads alone (a bare stream in the kernel's own order).
template <int STRIPS, int P, bool MATH>
__global__ void __launch_bounds__(256, 1) sk(const u16* __restrict__ X, const u16* __restrict__ W,
                                             const u16* __restrict__ bias, u16* __restrict__ out,
                                             float* __restrict__ ws, unsigned* __restrict__ tick) {
  constexpr int U = STRIPS * STEPS, NN = STRIPS * 64;
  extern __shared__ __align__(16) float red[];  // [2][8][16][PITCH]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int b = blockIdx.x;
  const int a = (int)((long long)U * b / P), e = (int)((long long)U * (b + 1) / P);
  const int s_lo = a / STEPS, s_hi = (e - 1) / STEPS;
  const int bnd = s_hi == s_lo ? e : (s_lo + 1) * STEPS;
  const int mine = e - a > warp ? (e - a - warp + 7) / 8 : 0;
  auto load = [&](uint4 (&w)[8], uint4 (&x)[MT], int i) {
    const int u = a + warp + 8 * i, s = u / STEPS, t = u % STEPS;
    const u16* p = W + (long long)(t * 32 + 8 * c) * NN + s * 64 + 8 * g;
#pragma unroll
    for (int r = 0; r < 8; ++r) w[r] = ldg_stream(p + (long long)r * NN);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) x[mt] = ldg_cached(X + (long long)(mt * 8 + g) * K + t * 32 + 8 * c);
  };
  float accA[MT][4][4], accB[MT][4][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) accA[mt][j][q] = accB[mt][j][q] = 0.f;
  unsigned sink = 0;
  uint4 w[2][8], x[2][MT];
#pragma unroll
  for (int d = 0; d < 2; ++d) if (d < mine) load(w[d], x[d], d);
  for (int i0 = 0; i0 < mine; i0 += 2) {
#pragma unroll
    for (int d = 0; d < 2; ++d)
      if (i0 + d < mine) {
        if constexpr (MATH) {
          if (a + warp + 8 * (i0 + d) < bnd) step(accA, w[d], x[d]);
          else step(accB, w[d], x[d]);
        } else {
#pragma unroll
          for (int r = 0; r < 8; ++r) sink ^= w[d][r].x ^ w[d][r].w;
          sink ^= x[d][0].y ^ x[d][1].z;
        }
      }
    if (i0 + 4 <= mine) {
#pragma unroll
      for (int d = 0; d < 2; ++d) load(w[d], x[d], i0 + 2 + d);
    } else {
#pragma unroll
      for (int d = 0; d < 2; ++d)
        if (i0 + 2 + d < mine) load(w[d], x[d], i0 + 2 + d);
    }
  }
  if constexpr (!MATH) {
    if (sink == 0x12345678u) out[tid] = 1;
    return;
  } else {
    // Each warp's accumulators to shared memory, both pieces.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int row = mt * 8 + 2 * c + (q & 1), col = 8 * g + 2 * j + (q >> 1);
          red[((0 * 8 + warp) * 16 + row) * PITCH + col] = accA[mt][j][q];
          red[((1 * 8 + warp) * 16 + row) * PITCH + col] = accB[mt][j][q];
        }
    __syncthreads();
    __shared__ int last_sh;
    for (int piece = 0; piece < (s_hi == s_lo ? 1 : 2); ++piece) {
      const int s = piece == 0 ? s_lo : s_hi;
      // 256 threads, 4 outputs each: rows tid / 16, columns 4 (tid % 16) .. +3.
      const int ml = tid / 16, nl = 4 * (tid % 16);
      float v[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float t = 0.f;
#pragma unroll
        for (int wk = 0; wk < 8; ++wk) t += red[((piece * 8 + wk) * 16 + ml) * PITCH + nl + q];
        v[q] = t;
      }
      const int cf = owner((long long)s * STEPS, U, P), cl = owner((long long)s * STEPS + STEPS - 1, U, P);
      const int n = cl - cf + 1;
      bool fin = n == 1;
      if (n > 1) {
        float4* slot = reinterpret_cast<float4*>(ws + ((long long)s * SLOTS + (b - cf)) * 1024) + tid;
        __stcg(slot, make_float4(v[0], v[1], v[2], v[3]));
        __syncthreads();
        if (tid == 0) {
          __threadfence();
          const unsigned old = atomicAdd(tick + s, 1u);
          last_sh = old == (unsigned)(n - 1);
          if (last_sh) tick[s] = 0;
          __threadfence();
        }
        __syncthreads();
        fin = last_sh;
        if (fin) {
          float t[4] = {0.f, 0.f, 0.f, 0.f};
          for (int k = 0; k < n; ++k) {
            const float4 p = k == b - cf ? make_float4(v[0], v[1], v[2], v[3])
                                         : __ldcg(reinterpret_cast<const float4*>(ws + ((long long)s * SLOTS + k) * 1024) + tid);
            t[0] += p.x; t[1] += p.y; t[2] += p.z; t[3] += p.w;
          }
#pragma unroll
          for (int q = 0; q < 4; ++q) v[q] = t[q];
        }
      }
      if (fin) {
        const int col = s * 64 + nl;
        u16 o[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) o[q] = f2bf(gelu(v[q] + bf2f(bias[col + q])));
        uint2 pk = make_uint2(o[0] | ((unsigned)o[1] << 16), o[2] | ((unsigned)o[3] << 16));
        *reinterpret_cast<uint2*>(out + (long long)ml * NN + col) = pk;
      }
    }
  }
}

__global__ void read_flush(const uint4* p, long long n, unsigned* sink) {
  unsigned s = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) s ^= p[i].x;
  if (s == 0x9e3779b9u) *sink = s;
}

static u16 h_f2bf(float f) {
  unsigned u; memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (u16)(u >> 16);
}
static float h_bf2f(u16 b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }

int main() {
  const int NMAX = 8448;
  std::vector<u16> hx((size_t)M * K), hw((size_t)K * NMAX), hb(NMAX);
  uint64_t st = 0x243F6A8885A308D3ull ^ (uint64_t)time(nullptr);
  auto rnd = [&]() { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (float)((st >> 11) * 0x1.0p-53) * 2.f - 1.f; };
  for (auto& v : hx) v = h_f2bf(rnd());
  for (auto& v : hw) v = h_f2bf(rnd() * 0.05f);
  for (auto& v : hb) v = h_f2bf(rnd() * 0.5f);
  u16 *dx, *dw8192, *dw8448, *db, *dout, *dout2;
  float* ws; unsigned* tick; unsigned* sink;
  CK(cudaMalloc(&dx, hx.size() * 2));
  CK(cudaMalloc(&dw8192, (size_t)K * 8192 * 2));
  CK(cudaMalloc(&dw8448, (size_t)K * 8448 * 2));
  CK(cudaMalloc(&db, NMAX * 2));
  CK(cudaMalloc(&dout, (size_t)M * NMAX * 2));
  CK(cudaMalloc(&dout2, (size_t)M * NMAX * 2));
  CK(cudaMalloc(&ws, (size_t)132 * SLOTS * 1024 * 4));
  CK(cudaMalloc(&tick, 132 * 4));
  CK(cudaMemset(tick, 0, 132 * 4));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw8448, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  // w [K, 8192]: the first 8192 columns of each row.
  CK(cudaMemcpy2D(dw8192, 8192 * 2, hw.data(), NMAX * 2, 8192 * 2, K, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), NMAX * 2, cudaMemcpyHostToDevice));
  const size_t FL = 512ull << 20;
  void* flush; CK(cudaMalloc(&flush, FL));
  CK(cudaMemset(flush, 1, FL));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const int SMEM = 2 * 8 * 16 * PITCH * 4;
  CK(cudaFuncSetAttribute(sk<128, 128, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  CK(cudaFuncSetAttribute(sk<132, 132, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  CK(cudaFuncSetAttribute(sk<128, 132, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  CK(cudaFuncSetAttribute(g16::kf_mm_98b5821be11c, cudaFuncAttributeMaxDynamicSharedMemorySize, 33280));
  struct Case { const char* name; double bytes; std::function<void()> run; };
  std::vector<Case> cases = {
    {"generated (nvcc) N=8192 128 CTAs", 8192.0 * K * 2, [&] { g16::kf_mm_98b5821be11c<<<128, 256, 33280>>>((const g16::__kf_bf16*)dx, (const g16::__kf_bf16*)dw8192, (const g16::__kf_bf16*)db, (g16::__kf_bf16*)dout); }},
    {"sk 128 strips / 128 CTAs", 8192.0 * K * 2, [&] { sk<128, 128, true><<<128, 256, SMEM>>>(dx, dw8192, db, dout2, ws, tick); }},
    {"sk 132 strips / 132 CTAs (N=8448)", 8448.0 * K * 2, [&] { sk<132, 132, true><<<132, 256, SMEM>>>(dx, dw8448, db, dout2, ws, tick); }},
    {"sk 128 strips / 132 CTAs (stream-K)", 8192.0 * K * 2, [&] { sk<128, 132, true><<<132, 256, SMEM>>>(dx, dw8192, db, dout2, ws, tick); }},
    {"loads only 128 / 128", 8192.0 * K * 2, [&] { sk<128, 128, false><<<128, 256, 0>>>(dx, dw8192, db, dout2, ws, tick); }},
    {"loads only 132 / 132 (N=8448)", 8448.0 * K * 2, [&] { sk<132, 132, false><<<132, 256, 0>>>(dx, dw8448, db, dout2, ws, tick); }},
    {"loads only 128 / 132 (stream-K)", 8192.0 * K * 2, [&] { sk<128, 132, false><<<132, 256, 0>>>(dx, dw8192, db, dout2, ws, tick); }},
  };
  // Checks: each math kernel against fp64 on 256 sampled columns (all 16 rows).
  auto check = [&](const char* name, int nn) {
    std::vector<u16> ho((size_t)M * nn);
    CK(cudaMemcpy(ho.data(), dout2, ho.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0; int bad = 0;
    for (int cc = 0; cc < 256; ++cc) {
      const int col = (int)((cc * 2654435761u) % (unsigned)nn);
      for (int r = 0; r < M; ++r) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += (double)h_bf2f(hx[(size_t)r * K + k]) * h_bf2f(hw[(size_t)k * NMAX + col]);
        acc += h_bf2f(hb[col]);
        const double ref = 0.5 * acc * (1 + tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
        const double err = fabs(h_bf2f(ho[(size_t)r * nn + col]) - ref) / std::max(1.0, fabs(ref));
        worst = std::max(worst, err);
        if (err > 1.0 / 128 + 0.01) ++bad;
      }
    }
    printf("%-40s check: max err / max(1,|ref|) %.5f, %d of %d outside 1/128 + 0.01\n", name, worst, bad, 256 * M);
  };
  CK(cudaMemset(dout2, 0, (size_t)M * NMAX * 2));
  cases[1].run(); CK(cudaDeviceSynchronize()); check(cases[1].name, 8192);
  CK(cudaMemset(dout2, 0, (size_t)M * NMAX * 2));
  cases[2].run(); CK(cudaDeviceSynchronize()); check(cases[2].name, 8448);
  for (int rep = 0; rep < 3; ++rep) {
    CK(cudaMemset(dout2, 0, (size_t)M * NMAX * 2));
    cases[3].run(); CK(cudaDeviceSynchronize()); check(cases[3].name, 8192);
  }
  {  // the generated kernel's output too, and stream-K bit-stable across launches
    cases[0].run(); CK(cudaDeviceSynchronize());
    std::vector<u16> a((size_t)M * 8192), b2((size_t)M * 8192);
    cases[3].run(); CK(cudaMemcpy(a.data(), dout2, a.size() * 2, cudaMemcpyDeviceToHost));
    cases[3].run(); CK(cudaMemcpy(b2.data(), dout2, b2.size() * 2, cudaMemcpyDeviceToHost));
    printf("stream-K repeat launches bit-identical: %s\n", a == b2 ? "yes" : "NO");
  }
  for (int pass = 0; pass < 2; ++pass)
    for (int fl = 0; fl < 2; ++fl)
      for (auto& cs : cases) {
        std::vector<float> t;
        for (int it = 0; it < 40; ++it) {
          if (fl == 0) read_flush<<<1056, 512>>>((const uint4*)flush, FL / 16, sink);
          else CK(cudaMemsetAsync(flush, it & 0xff, 256ull << 20));
          CK(cudaEventRecord(e0));
          cs.run();
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
          t.push_back(ms * 1000);
        }
        CK(cudaGetLastError());
        std::sort(t.begin(), t.end());
        printf("pass %d %-40s %-7s best %6.1f us  median %6.1f us  %5.0f GB/s (weights, median)\n", pass, cs.name,
               fl ? "memset" : "reads", t[0], t[t.size() / 2], cs.bytes / (t[t.size() / 2] * 1e3));
      }
  return 0;
}
