// Staggered start trial: the 50257-wide softmax's bulk kernels, f32 with exp(x - max)
// kept over the staged row (row/6: F6-F8) beside row/5's (F0) and cudaMemcpy; each
// kernel's error on sampled rows against fp64.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
namespace C0 {
#include "C0.cu"
}
namespace C3 {
#include "C3.cu"
}
namespace C4 {
#include "C4.cu"
}
namespace C5 {
#include "C5.cu"
}
constexpr long long W = 50257;
__global__ void init(float* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761ull) ^ (unsigned)(i >> 13) * 40503u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = (h & 0xffffff) / 16777216.f * 16.f - 8.f;
  }
}
__global__ void to_bf16(const float* f, unsigned short* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned u = __float_as_uint(f[i]); p[i] = (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
}
__global__ void flush(const int4* p, long long n, int* sink) {
  int acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) acc ^= p[i].x;
  if (acc == 0x12345678) *sink = acc;
}

static double bf2d(unsigned short b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
int main(int argc, char** argv) {
  const long long R = argc > 1 ? atoll(argv[1]) : 2670, n = R * W;
  const bool wflush = getenv("FLUSH_WRITE") != nullptr;
  float *x32, *o32; unsigned short *x16, *o16; int4* fl; int* sink;
  cudaMalloc(&x32, n * 4); cudaMalloc(&x16, n * 2); cudaMalloc(&o32, n * 4); cudaMalloc(&o16, n * 2);
  cudaMalloc(&fl, 256 << 20); cudaMalloc(&sink, 4);
  init<<<1024, 256>>>(x32, n); to_bf16<<<1024, 256>>>(x32, x16, n);
  cudaMemset(fl, 1, 256 << 20);
  std::vector<float> h32(n); std::vector<unsigned short> h16(n);
  cudaMemcpy(h32.data(), x32, n * 4, cudaMemcpyDeviceToHost); cudaMemcpy(h16.data(), x16, n * 2, cudaMemcpyDeviceToHost);
  const long long sample[] = {0, 1, 2, 131, 132, R / 2, R - 2, R - 1};
  auto ref = [&](bool bf, long long r, std::vector<double>& p) {
    p.resize(W); double m = -INFINITY, s = 0;
    for (long long c = 0; c < W; ++c) { p[c] = bf ? bf2d(h16[r * W + c]) : h32[r * W + c]; m = std::max(m, p[c]); }
    for (long long c = 0; c < W; ++c) { p[c] = std::exp(p[c] - m); s += p[c]; }
    for (long long c = 0; c < W; ++c) p[c] /= s;
  };
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  auto run = [&](const char* name, bool bf, auto launch) {
    std::vector<float> t;
    cudaMemset(bf ? (void*)o16 : (void*)o32, 0xff, n * (bf ? 2 : 4));
    for (int i = 0; i < 23; ++i) {
      if (wflush) cudaMemsetAsync(fl, 0, 256 << 20); else flush<<<1056, 512>>>(fl, (256 << 20) / 16, sink);
      cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    const cudaError_t e = cudaGetLastError();
    double err = 0; std::vector<double> p; std::vector<float> y32(W); std::vector<unsigned short> y16(W);
    if (strncmp(name, "memcpy", 6)) {
      for (long long r : sample) {
        ref(bf, r, p);
        if (bf) cudaMemcpy(y16.data(), o16 + r * W, W * 2, cudaMemcpyDeviceToHost);
        else cudaMemcpy(y32.data(), o32 + r * W, W * 4, cudaMemcpyDeviceToHost);
        for (long long c = 0; c < W; ++c) err = std::max(err, std::fabs((bf ? bf2d(y16[c]) : y32[c]) - p[c]));
      }
    }
    const double bytes = 2.0 * n * (bf ? 2 : 4);
    printf("%-6s R=%lld: best %6.1f us median %6.1f us, %5.0f GB/s median; max err %.3g; %s\n", name, R, t[0],
           t[t.size() / 2], bytes / t[t.size() / 2] / 1e3, err, cudaGetErrorString(e));
  };
  printf("flush by %s\n", wflush ? "a 256 MB memset" : "reads");
  run("memcpy", true, [&] { cudaMemcpyAsync(o16, x16, n * 2, cudaMemcpyDeviceToDevice); });
  cudaFuncSetAttribute(C0::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 201216);
  cudaFuncSetAttribute(C3::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 201216);
  cudaFuncSetAttribute(C4::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 201216);
  cudaFuncSetAttribute(C5::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 201216);
  for (int rep = 0; rep < 2; ++rep) {
    run("C0", true, [&] { C0::kf_entry<<<(unsigned)std::min<long long>(R, 132), 512, 201216>>>((const C0::__kf_bf16*)x16, (C0::__kf_bf16*)o16, R); });
    run("C3", true, [&] { C3::kf_entry<<<(unsigned)std::min<long long>(R, 132), 512, 201216>>>((const C3::__kf_bf16*)x16, (C3::__kf_bf16*)o16, R); });
    run("C4", true, [&] { C4::kf_entry<<<(unsigned)std::min<long long>(R, 132), 512, 201216>>>((const C4::__kf_bf16*)x16, (C4::__kf_bf16*)o16, R); });
    run("C5", true, [&] { C5::kf_entry<<<(unsigned)std::min<long long>(R, 132), 512, 201216>>>((const C5::__kf_bf16*)x16, (C5::__kf_bf16*)o16, R); });
  }
}
