// Few-row streamed products (kfuse's M = 1 and M = 16 kernels, 8192 x 8192
// bf16 weights, one 64-column strip a CTA, 128 CTAs) and the bare strip
// reads: when does each CTA end? If CTAs stream at different rates, the
// kernel waits for the slowest, as the bulk softmax's blocks did (run106).
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
__device__ unsigned long long* g_ends;
namespace s1 {
#include "s1.cu"
}
namespace s16 {
#include "s16.cu"
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
constexpr int K = 8192;
__global__ void __launch_bounds__(256, 1) read_strips16(const uint4* __restrict__ w, int n, unsigned* sink) {
  if (threadIdx.x == 0 && g_ends) { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); unsigned sm; asm("mov.u32 %0, %%smid;" : "=r"(sm)); g_ends[blockIdx.x * 3] = t; g_ends[blockIdx.x * 3 + 2] = sm; }
  const int strip = blockIdx.x;
  unsigned acc = 0;
  for (int v0 = threadIdx.x; v0 < K * 8; v0 += 256 * 16) {
    uint4 v[16];
#pragma unroll
    for (int u = 0; u < 16; ++u) {
      const int vv = v0 + u * 256;
      const uint4* p = w + (size_t)(vv >> 3) * (n / 8) + strip * 8 + (vv & 7);
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p));
    }
#pragma unroll
    for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  sink[blockIdx.x * 256 + threadIdx.x] = acc;
  if (g_ends) { __syncthreads(); if (threadIdx.x == 0) { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); g_ends[blockIdx.x * 3 + 1] = t; } }
}
__global__ void flush(uint4* p, size_t n, unsigned* sink) {
  unsigned a = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) a ^= p[i].x;
  if (a == 0x12345) sink[0] = a;
}
typedef unsigned short u16;
__global__ void fill(u16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    float f = ((h & 0xffff) / 65536.f - 0.5f) * 2.f;
    p[i] = (u16)(__float_as_uint(f) >> 16);
  }
}
template <class F> void ends(const char* name, F launch, uint4* fl, size_t fn, unsigned* sink, unsigned long long* d, int ctas) {
  for (int rep = 0; rep < 3; ++rep) {
    unsigned long long* on = d;
    CK(cudaMemcpyToSymbol(g_ends, &on, sizeof(on)));
    CK(cudaMemset(d, 0, ctas * 3 * 8));
    if (getenv("FLUSH_WRITE")) cudaMemsetAsync(fl, 0, fn * 16); else flush<<<264, 1024>>>(fl, fn, sink);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    cudaEventRecord(a); launch(); cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b);
    std::vector<unsigned long long> h(ctas * 3);
    CK(cudaMemcpy(h.data(), d, h.size() * 8, cudaMemcpyDeviceToHost));
    unsigned long long t0 = ~0ull;
    for (int i = 0; i < ctas; ++i) t0 = std::min(t0, h[i * 3]);
    std::vector<double> e(ctas);
    double smax = 0;
    for (int i = 0; i < ctas; ++i) { e[i] = (h[i * 3 + 1] - t0) / 1e3; smax = std::max(smax, (h[i * 3] - t0) / 1e3); }
    std::vector<double> s = e; std::sort(s.begin(), s.end());
    printf("%-28s event %7.1f us; CTA ends (us): min %6.1f p10 %6.1f median %6.1f p90 %6.1f max %6.1f; latest start +%.2f\n",
           name, ms * 1000, s[0], s[ctas / 10], s[ctas / 2], s[ctas * 9 / 10], s[ctas - 1], smax);
    if (rep == 2) {
      std::vector<int> idx(ctas); for (int i = 0; i < ctas; ++i) idx[i] = i;
      std::sort(idx.begin(), idx.end(), [&](int x, int y) { return e[x] > e[y]; });
      printf("    slowest:");
      for (int j = 0; j < 6; ++j) printf(" [blk %d sm %llu %.1f]", idx[j], h[idx[j] * 3 + 2], e[idx[j]]);
      printf("\n    fastest:");
      for (int j = ctas - 1; j >= ctas - 6; --j) printf(" [blk %d sm %llu %.1f]", idx[j], h[idx[j] * 3 + 2], e[idx[j]]);
      printf("\n");
    }
    unsigned long long* off = nullptr;
    CK(cudaMemcpyToSymbol(g_ends, &off, sizeof(off)));
  }
}
int main() {
  u16 *A, *B, *bias, *out;
  CK(cudaMalloc(&A, 64 * K * 2)); CK(cudaMalloc(&B, (size_t)K * 8192 * 2)); CK(cudaMalloc(&bias, 8192 * 2));
  CK(cudaMalloc(&out, 64 * 8192 * 2));
  fill<<<1024, 256>>>(A, 64 * K, 1); fill<<<1024, 256>>>(B, (size_t)K * 8192, 2); fill<<<64, 256>>>(bias, 8192, 3);
  size_t fn = (size_t)256 << 20; uint4* fl; CK(cudaMalloc(&fl, fn)); CK(cudaMemset(fl, 0, fn)); fn /= 16;
  unsigned* sink; CK(cudaMalloc(&sink, 1 << 20));
  unsigned long long* d; CK(cudaMalloc(&d, 4096 * 3 * 8));
  CK(cudaFuncSetAttribute(s1::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 33280));
  CK(cudaFuncSetAttribute(s16::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 33280));
  ends("read strips 128", [&] { read_strips16<<<128, 256>>>((const uint4*)B, 8192, sink); }, fl, fn, sink, d, 128);
  ends("s1 stream M=1", [&] { s1::kf_entry<<<128, 256, 33280>>>((const s1::__kf_bf16*)A, (const s1::__kf_bf16*)B, (const s1::__kf_bf16*)bias, (s1::__kf_bf16*)out); }, fl, fn, sink, d, 128);
  ends("s16 stream M=16", [&] { s16::kf_entry<<<128, 256, 33280>>>((const s16::__kf_bf16*)A, (const s16::__kf_bf16*)B, (const s16::__kf_bf16*)bias, (s16::__kf_bf16*)out); }, fl, fn, sink, d, 128);
  CK(cudaDeviceSynchronize());
  return 0;
}
