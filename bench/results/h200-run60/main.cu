// Few-row matmul kernels side by side (generated source), against a strip read of the weights.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cuda_runtime.h>
namespace s16 {
#include "s16.cu"
}
namespace s16ef {
#include "s16ef.cu"
}
namespace c64def {
#include "c64def.cu"
}
namespace d16s2 {
#include "d16s2.cu"
}
namespace d16s1 {
#include "d16s1.cu"
}
namespace b16s4 {
#include "b16s4.cu"
}
namespace n8 {
#include "n8.cu"
}
namespace n4 {
#include "n4.cu"
}
namespace n2 {
#include "n2.cu"
}
namespace t64 {
#include "t64.cu"
}
namespace c64a {
#include "c64a.cu"
}
namespace c64b {
#include "c64b.cu"
}
namespace c64c {
#include "c64c.cu"
}
namespace c64d {
#include "c64d.cu"
}
namespace c64e {
#include "c64e.cu"
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
constexpr int K = 8192, N = 8192;
__global__ void __launch_bounds__(256, 1) read_strips16(const uint4* __restrict__ w, unsigned* sink) {
  const int strip = blockIdx.x;
  unsigned acc = 0;
  for (int v0 = threadIdx.x; v0 < K * 8; v0 += 256 * 16) {
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
__global__ void __launch_bounds__(256, 1) read_grid(const uint4* __restrict__ w, size_t n, unsigned* sink) {
  unsigned acc = 0;
  const size_t stride = (size_t)gridDim.x * 256;
  for (size_t v0 = blockIdx.x * 256 + threadIdx.x; v0 < n; v0 += stride * 16) {
    uint4 v[16];
#pragma unroll
    for (int u = 0; u < 16; ++u) {
      const size_t i = v0 + u * stride;
      const uint4* p = w + (i < n ? i : 0);
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p));
    }
#pragma unroll
    for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  sink[blockIdx.x * 256 + threadIdx.x] = acc;
}
__global__ void flush(uint4* p, size_t n, unsigned* sink) {
  unsigned a = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a ^= p[i].x;
  if (a == 0x12345) sink[0] = a;
}
typedef unsigned short u16;
template <class F> float timeit(const char* name, double bytes, F launch, uint4* fl, size_t fn, unsigned* sink) {
  std::vector<float> ts;
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  static int reps = getenv("REPS") ? atoi(getenv("REPS")) : 25;
  for (int i = 0; i < reps; ++i) {
    if (getenv("FLUSH_WRITE")) cudaMemsetAsync(fl, 0, fn * 16); else flush<<<264, 1024>>>(fl, fn, sink);
    cudaEventRecord(a); launch(); cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); if (i >= std::min(5, reps - 1)) ts.push_back(ms * 1000);
  }
  CK(cudaGetLastError());
  std::sort(ts.begin(), ts.end());
  printf("%-28s best %7.1f us  median %7.1f us  %6.0f GB/s (median)\n", name, ts[0], ts[ts.size() / 2], bytes / (ts[ts.size() / 2] * 1e3));
  return ts[0];
}
__global__ void fill(u16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    float f = ((h & 0xffff) / 65536.f - 0.5f) * 2.f;
    p[i] = (u16)(__float_as_uint(f) >> 16);
  }
}
float bf(u16 x) { unsigned u = (unsigned)x << 16; float f; memcpy(&f, &u, 4); return f; }
int main() {
  u16 *A, *B, *bias, *out[15];
  CK(cudaMalloc(&A, 64 * K * 2)); CK(cudaMalloc(&B, (size_t)K * N * 2)); CK(cudaMalloc(&bias, N * 2));
  for (int i = 0; i < 15; ++i) CK(cudaMalloc(&out[i], 64 * N * 2));
  fill<<<1024, 256>>>(A, 64 * K, 1); fill<<<1024, 256>>>(B, (size_t)K * N, 2); fill<<<64, 256>>>(bias, N, 3);
  float* ws; int* cnt; CK(cudaMalloc(&ws, 64 << 20)); CK(cudaMalloc(&cnt, 1 << 20)); CK(cudaMemset(cnt, 0, 1 << 20));
  size_t fn = (size_t)256 << 20; uint4* fl; CK(cudaMalloc(&fl, fn)); CK(cudaMemset(fl, 0, fn)); fn /= 16;
  unsigned* sink; CK(cudaMalloc(&sink, 1 << 20));
  const double b64 = (64.0 * K + (double)K * N + 64.0 * N) * 2, b16 = (16.0 * K + (double)K * N + 16.0 * N) * 2;
#define ARGS(ns, o) (const ns::__kf_bf16*)A, (const ns::__kf_bf16*)B, (const ns::__kf_bf16*)bias, (ns::__kf_bf16*)out[o]
#define RUN(label, bytes, ns, o, gx, gy, th, smem, ...) \
  CK(cudaFuncSetAttribute(ns::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)); \
  timeit(label, bytes, [&] { __VA_ARGS__; ns::kf_entry<<<dim3(gx, gy), th, smem>>>(ARGS(ns, o)); }, fl, fn, sink);
#define RUNWS(label, bytes, ns, o, gx, gy, th, smem, ...) \
  CK(cudaFuncSetAttribute(ns::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)); \
  timeit(label, bytes, [&] { __VA_ARGS__; ns::kf_entry<<<dim3(gx, gy), th, smem>>>(ARGS(ns, o), ws, cnt); }, fl, fn, sink);
  timeit("read strips (B only)", (double)K * N * 2, [&] { read_strips16<<<128, 256>>>((const uint4*)B, sink); }, fl, fn, sink);
  RUN("s16 stream bm16 wk8 s2 (M=16)", b16, s16, 7, 128, 1, 256, 33280);
  RUNWS("t64 tiled 64x64x64 sk2 ws", b64, t64, 0, 128, 2, 128, 65552);
  RUNWS("t64 + memset of counters", b64, t64, 0, 128, 2, 128, 65552, cudaMemsetAsync(cnt, 0, 512));
  RUN("n8 stream wn8 wk1 sk8 cluster", b16, n8, 11, 16, 8, 256, 32832);
  RUN("n4 stream wn4 wk2 sk4 cluster", b16, n4, 12, 32, 4, 256, 32896);
  RUN("n2 stream wn2 wk4 sk2 cluster", b16, n2, 13, 64, 2, 256, 33024);
  RUN("d16s2 stream, 2 x 2 steps ahead", b16, d16s2, 8, 128, 1, 256, 33280);
  RUN("d16s1 stream, 2 x 1 step ahead", b16, d16s1, 9, 128, 1, 256, 33280);
  RUN("b16s4 stream, batches of 4", b16, b16s4, 10, 128, 1, 256, 33280);
  RUN("c64a 64x64x64 sk2 cluster", b64, c64a, 1, 128, 2, 128, 65536);
  RUN("c64b 64x128x64 sk2 cluster", b64, c64b, 2, 64, 2, 128, 98304);
  RUN("c64c 64x64x64 sk4 cluster", b64, c64c, 3, 128, 4, 128, 65536);
  RUN("c64d 64x128x64 w2x4 sk2 cl", b64, c64d, 4, 64, 2, 256, 98304);
  RUN("c64e 64x128x128 s3 sk2 cl", b64, c64e, 5, 64, 2, 128, 147456);
  CK(cudaDeviceSynchronize());
  std::vector<u16> h[15];
  for (int i = 0; i < 15; ++i) { h[i].resize(64 * N); CK(cudaMemcpy(h[i].data(), out[i], 64 * N * 2, cudaMemcpyDeviceToHost)); }
  double sum = 0; for (int i = 0; i < 64 * N; ++i) sum += std::abs(bf(h[0][i]));
  printf("mean |out| %.3f\n", sum / (64 * N));
  for (int v : {8, 9, 10, 11, 12, 13, 14}) { double d = 0; for (int i = 0; i < 16 * N; ++i) d = std::max(d, (double)std::abs(bf(h[v][i]) - bf(h[7][i]))); printf("max |out%d - s16| %.4f (M = 16)\n", v, d); }
  for (int v = 1; v < 4; ++v) { double d = 0; for (int i = 0; i < 64 * N; ++i) d = std::max(d, (double)std::abs(bf(h[v][i]) - bf(h[0][i]))); printf("max |out%d - t64| %.4f\n", v, d); }
}
