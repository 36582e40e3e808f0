// Ninth look: loads without the kf_valid guard (a16_G, l16_G: the generator after the change) beside a16_A, l16_N (before). Eighth look: 32-bit index arithmetic (a16_A32, l16_N32, l16_PK32: `long long` -> `int` in the kernels). Seventh look (bf16 RMSNorm 8192 looped, 512 threads: N as generated with L2 policies, P plain loads and stores, L L1 evict_last then evict_first loads with plain stores, K: plain sums for Kahan); sixth look (a16_var.h); fifth look was at RMSNorm where torch.compile leads (f32 [32768, 4096], bf16 [16384, 8192]):
// torch.compile's own kernels (Triton cubins from h200-run69's cache, loaded
// through the driver API) beside kfuse's tuned register-resident kernels
// with other load forms (hints.h: E L1+L2 evict_last, F L1 evict_last, G L2
// evict_first; O as generated) and the looped one (l32_O), and cudaMemcpy.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
namespace l16_N {
#include "l16_N.cu"
}
namespace l16_P {
#include "l16_P.cu"
}
namespace l16_L {
#include "l16_L.cu"
}
namespace l16_LK {
#include "l16_LK.cu"
}
namespace l16_PK {
#include "l16_PK.cu"
}
namespace l16_G {
#include "l16_G.cu"
}
namespace a16_G {
#include "a16_G.cu"
}
namespace a16_A32 {
#include "a16_A32.cu"
}
namespace l16_N32 {
#include "l16_N32.cu"
}
namespace l16_PK32 {
#include "l16_PK32.cu"
}
namespace a16_A {
#include "a16_A.cu"
}
namespace a16_Z {
#include "a16_Z.cu"
}
namespace a16_B {
#include "a16_B.cu"
}
namespace a16_C {
#include "a16_C.cu"
}
namespace a16_D {
#include "a16_D.cu"
}
namespace a16_E {
#include "a16_E.cu"
}
namespace a16_256 {
#include "a16_256.cu"
}
__global__ void init(float* p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761ull) ^ seed ^ (unsigned)(i >> 13) * 40503u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = (h & 0xffffff) / 16777216.f * 4.f - 2.f;
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
int main() {
  const bool wflush = getenv("FLUSH_WRITE") != nullptr;
  const long long R32 = 32768, W32 = 4096, R16 = 16384, W16 = 8192, n = R32 * W32;
  float *x32, *w32, *o32, *x32b, *w32b, *b32v; unsigned short *x16, *w16, *o16; int4* fl; int* sink;
  cudaMalloc(&x32, n * 4); cudaMalloc(&o32, n * 4); cudaMalloc(&w32, W32 * 4);
  cudaMalloc(&x32b, n * 4); cudaMalloc(&w32b, W16 * 4); cudaMalloc(&b32v, W16 * 4);
  cudaMalloc(&x16, n * 2); cudaMalloc(&o16, n * 2); cudaMalloc(&w16, W16 * 2);
  cudaMalloc(&fl, 256 << 20); cudaMalloc(&sink, 4);
  init<<<1024, 256>>>(x32, n, 1); init<<<16, 256>>>(w32, W32, 2);
  init<<<1024, 256>>>(x32b, n, 3); init<<<16, 256>>>(w32b, W16, 4); init<<<16, 256>>>(b32v, W16, 5);
  to_bf16<<<1024, 256>>>(x32b, x16, n); to_bf16<<<16, 256>>>(w32b, w16, W16);
  cudaMemset(fl, 1, 256 << 20);
  cudaDeviceSynchronize();
  CUmodule m[4]; CUfunction t[4];
  const char* cub[4] = {"t32_4096.cubin", "t32_2048.cubin", "t16_8192.cubin", "t16_2048.cubin"};
  for (int i = 0; i < 4; ++i) {
    CUresult e = cuModuleLoad(&m[i], cub[i]);
    if (e == CUDA_SUCCESS) e = cuModuleGetFunction(&t[i], m[i], "triton_red_fused__fused_rms_norm_0");
    if (e != CUDA_SUCCESS) { printf("%s: load error %d\n", cub[i], (int)e); return 1; }
  }
  auto triton = [&](int i, void* x, void* w, void* o, int rows, int cols) {
    unsigned xn = rows, rn = cols; void* scratch = nullptr;
    void* args[] = {&x, &w, &o, &xn, &rn, &scratch, &scratch};
    cuLaunchKernel(t[i], rows, 1, 1, 512, 1, 1, 64, 0, args, nullptr);
  };
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ref32; bool reset32 = false; std::vector<unsigned short> ref16;
  auto run = [&](const char* name, bool bf, double bytes, auto launch) {
    std::vector<float> ts;
    cudaMemset(bf ? (void*)o16 : (void*)o32, 0, n * (bf ? 2 : 4));
    for (int i = 0; i < 23; ++i) {
      if (wflush) cudaMemsetAsync(fl, 0, 256 << 20); else flush<<<1056, 512>>>(fl, (256 << 20) / 16, sink);
      cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 3) ts.push_back(ms * 1000);
    }
    std::sort(ts.begin(), ts.end());
    const cudaError_t e = cudaGetLastError();
    // Outputs against the first kernel of the dtype (kfuse as generated).
    double diff = 0;
    if (strncmp(name, "memcpy", 6)) {
      if (bf) {
        std::vector<unsigned short> y(n); cudaMemcpy(y.data(), o16, n * 2, cudaMemcpyDeviceToHost);
        if (ref16.empty()) ref16 = y;
        for (long long i = 0; i < n; i += 97) diff = std::max(diff, std::fabs(bf2d(y[i]) - bf2d(ref16[i])) / (std::fabs(bf2d(ref16[i])) + 1e-3));
      } else {
        std::vector<float> y(n); cudaMemcpy(y.data(), o32, n * 4, cudaMemcpyDeviceToHost);
        if (ref32.empty() || reset32) { ref32 = y; reset32 = false; }
        for (long long i = 0; i < n; i += 97) diff = std::max(diff, std::fabs((double)y[i] - ref32[i]) / (std::fabs(ref32[i]) + 1e-3));
      }
    }
    printf("%-10s best %6.1f us median %6.1f us %5.0f GB/s; rel diff %.2g; %s\n", name, ts[0], ts[ts.size() / 2],
           bytes / ts[ts.size() / 2] / 1e3, diff, cudaGetErrorString(e));
  };
  printf("flush by %s\n", wflush ? "a 256 MB memset" : "reads");
  const double b16 = 2.0 * n * 2 + W16 * 2;
  run("memcpy16", true, 2.0 * n * 2, [&] { cudaMemcpyAsync(o16, x16, n * 2, cudaMemcpyDeviceToDevice); });
#define K(ns, th) run(#ns, true, b16, [&] { ns::kf_entry<<<R16, th>>>((const ns::__kf_bf16*)x16, (const ns::__kf_bf16*)w16, (ns::__kf_bf16*)o16); })
  K(a16_A, 512); K(a16_G, 512); K(l16_N, 512); K(l16_G, 512); K(l16_PK32, 512);
  run("triton8192", true, b16, [&] { triton(2, x16, w16, o16, R16, W16); });
  K(a16_A, 512); K(a16_G, 512); K(l16_G, 512);
}
