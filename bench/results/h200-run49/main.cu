// Side-by-side timing of streamed few-row kernels (generated source, and
// hand-edited copies) against a plain strip read of the same weights.
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
namespace v_gen_s3 {
#include "gen_s3.cu"
}
namespace v_gen_s2 {
#include "gen_s2.cu"
}
namespace v_gen_s4 {
#include "gen_s4.cu"
}
namespace v_batch_s2 {
#include "batch_s2.cu"
}
namespace v_batch_s3 {
#include "batch_s3.cu"
}
namespace v_batch_s4 {
#include "batch_s4.cu"
}
namespace v_nomma_s3 {
#include "nomma_s3.cu"
}
namespace v_gen_m1 {
#include "gen_m1.cu"
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
typedef unsigned short u16;
constexpr int K = 8192, N = 8192, M = 16, kCopies = 3;

__global__ void __launch_bounds__(256, 1) read_strips16(const uint4* __restrict__ w, unsigned* sink) {
  // CTA b: bytes [128 b, 128 b + 128) of every row; thread t: row t / 8, chunk t % 8.
  const int strip = blockIdx.x;
  unsigned acc = 0;
  const int nv = K * 8;
  for (int v0 = threadIdx.x; v0 < nv; v0 += 256 * 16) {
    uint4 v[16];
#pragma unroll
    for (int u = 0; u < 16; ++u) {
      const int vv = v0 + u * 256;
      const uint4* p = w + (size_t)(vv >> 3) * (N / 8) + strip * 8 + (vv & 7);
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p));
    }
#pragma unroll
    for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  sink[blockIdx.x * 256 + threadIdx.x] = acc;
}

template <typename F> struct Elem;
template <typename T> struct Elem<void (*)(const T*, const T*, const T*, T*)> { using type = T; };
// The streamed kernel's access pattern without its products: 8 warps, warp
// w takes steps w, w + 8, ... of 32 rows; lane (g, c) rows k0 + 8c + r
// (CONSEC: k0 + 4r + c), columns 8g; S steps a batch.
template <int S, bool CONSEC>
__global__ void __launch_bounds__(256, 1) read_ours(const u16* __restrict__ w, unsigned* sink) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const u16* base = w + blockIdx.x * 64 + 8 * g;
  unsigned acc = 0;
  for (int i0 = 0; i0 < K / 32 / 8; i0 += S) {
    uint4 v[S][8];
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int r = 0; r < 8; ++r) {
        const int row = (warp + (i0 + s) * 8) * 32 + (CONSEC ? 4 * r + c : 8 * c + r);
        const u16* p = base + (size_t)row * N;
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[s][r].x), "=r"(v[s][r].y), "=r"(v[s][r].z), "=r"(v[s][r].w) : "l"(p));
      }
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int r = 0; r < 8; ++r) acc ^= v[s][r].x ^ v[s][r].y ^ v[s][r].z ^ v[s][r].w;
  }
  sink[blockIdx.x * 256 + threadIdx.x] = acc;
}
static u16 f2bf(float f) { uint32_t u; memcpy(&u, &f, 4); return (u16)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static float bf2f(u16 b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
static uint32_t rng = 12345;
static float urand() { rng = rng * 1664525u + 1013904223u; return ((rng >> 8) & 0xffffff) / 16777216.f * 2.f - 1.f; }

template <typename F>
static void timeit(const char* name, F launch, double bytes) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int it = 0; it < 30; ++it) {
    CK(cudaEventRecord(a));
    launch(it % kCopies);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    if (it >= 5) t.push_back(ms * 1000.f);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  printf("%-12s best %7.2f us  med %7.2f us  %6.0f GB/s best  %6.0f med\n", name, t[0], t[t.size() / 2],
         bytes / t[0] / 1e3, bytes / t[t.size() / 2] / 1e3);
}

int main() {
  std::vector<u16> ha((size_t)M * K), hw((size_t)K * N), hb(N);
  for (auto& v : ha) v = f2bf(urand());
  for (auto& v : hw) v = f2bf(urand() * 0.05f);
  for (auto& v : hb) v = f2bf(urand());
  u16 *a, *bias, *out, *w[kCopies];
  unsigned* sink;
  CK(cudaMalloc(&a, ha.size() * 2)); CK(cudaMalloc(&bias, N * 2)); CK(cudaMalloc(&out, (size_t)M * N * 2));
  CK(cudaMalloc(&sink, 128 * 256 * 4));
  for (int i = 0; i < kCopies; ++i) { CK(cudaMalloc(&w[i], hw.size() * 2)); CK(cudaMemcpy(w[i], hw.data(), hw.size() * 2, cudaMemcpyHostToDevice)); }
  CK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(bias, hb.data(), N * 2, cudaMemcpyHostToDevice));
  // Reference: 64 sampled columns, every row.
  std::vector<int> cols; for (int i = 0; i < 64; ++i) cols.push_back((i * 2654435761u) % N);
  auto check = [&](const char* name, int rows) {
    std::vector<u16> ho((size_t)rows * N);
    CK(cudaMemcpy(ho.data(), out, ho.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int m = 0; m < rows; ++m) for (int n : cols) {
      double s = 0; for (int k = 0; k < K; ++k) s += (double)bf2f(ha[(size_t)m * K + k]) * bf2f(hw[(size_t)k * N + n]);
      s += bf2f(hb[n]);
      const double g = 0.5 * s * (1 + tanh(0.7978845608 * (s + 0.044715 * s * s * s)));
      worst = std::max(worst, fabs(g - bf2f(ho[(size_t)m * N + n])) / (1 + fabs(g)));
    }
    printf("%-12s check max rel err %.3g %s\n", name, worst, worst < 2e-2 ? "ok" : "FAIL");
  };
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("%s SMs %d\n", p.name, p.multiProcessorCount);
  const double wbytes = (double)K * N * 2;
  timeit("read_strips", [&](int c) { read_strips16<<<128, 256>>>((const uint4*)w[c], sink); }, wbytes);
  auto run = [&](const char* name, auto kern, int bm, int wk, int rows, bool chk) {
    using T = typename Elem<decltype(kern)>::type;
    const int smem = wk * bm * 65 * 4;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaFuncAttributes at; CK(cudaFuncGetAttributes(&at, kern));
    printf("%-12s regs %d spill %zu\n", name, at.numRegs, at.localSizeBytes);
    auto launch = [&](int c) {
      kern<<<dim3(128 * ((rows + bm - 1) / bm)), dim3(32 * wk), smem>>>(
          (const T*)a, (const T*)w[c], (const T*)bias, (T*)out);
    };
    CK(cudaMemset(out, 0, (size_t)M * N * 2));
    launch(0); CK(cudaDeviceSynchronize());
    if (chk) check(name, rows);
    timeit(name, launch, wbytes);
  };
  run("gen_s3", v_gen_s3::k_gen_s3, 16, 8, 16, true);
  run("gen_s2", v_gen_s2::k_gen_s2, 16, 8, 16, true);
  run("gen_s4", v_gen_s4::k_gen_s4, 16, 8, 16, true);
  run("batch_s2", v_batch_s2::k_batch_s2, 16, 8, 16, true);
  run("batch_s3", v_batch_s3::k_batch_s3, 16, 8, 16, true);
  run("batch_s4", v_batch_s4::k_batch_s4, 16, 8, 16, true);
  timeit("ours_b2", [&](int c) { read_ours<2, false><<<128, 256>>>(w[c], sink); }, wbytes);
  timeit("ours_b4", [&](int c) { read_ours<4, false><<<128, 256>>>(w[c], sink); }, wbytes);
  timeit("ours_b2_cons", [&](int c) { read_ours<2, true><<<128, 256>>>(w[c], sink); }, wbytes);
  timeit("ours_b4_cons", [&](int c) { read_ours<4, true><<<128, 256>>>(w[c], sink); }, wbytes);
  run("nomma_s3", v_nomma_s3::k_nomma_s3, 16, 8, 16, false);
  run("gen_m1", v_gen_m1::k_gen_m1, 8, 8, 1, true);
  timeit("read_strips", [&](int c) { read_strips16<<<128, 256>>>((const uint4*)w[c], sink); }, wbytes);
  return 0;
}
