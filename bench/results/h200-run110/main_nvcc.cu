// Trial: the 50257-wide softmax's generated bulk kernels (row/11, dyn=1) beside hand
// edits: bf16 with a share of the exponentials on the FMA pipe (kf_ex2_poly), f32 with
// the output multiplied by the reciprocal, ex2.approx, and row pieces waited on one by
// one (chunk). Errors on sampled rows against fp64; kf_ex2_poly against exp2 in fp64.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
namespace B0 {
#include "B0.cu"
}
namespace B1 {
#include "B1.cu"
}
namespace B2 {
#include "B2.cu"
}
namespace B0h {
#include "B0h.cu"
}
namespace B1h {
#include "B1h.cu"
}
namespace B2h {
#include "B2h.cu"
}
namespace F0 {
#include "F0.cu"
}
namespace F3 {
#include "F3.cu"
}
namespace F7 {
#include "F7.cu"
}
namespace F8 {
#include "F8.cu"
}
namespace F9 {
#include "F9.cu"
}
namespace F7h {
#include "F7h.cu"
}
namespace F10 {
#include "F10.cu"
}
namespace F12 {
#include "F12.cu"
}
#include "poly.h"
constexpr long long W = 50257;
__device__ __forceinline__ unsigned hash(unsigned long long i) {
  unsigned h = (unsigned)(i * 2654435761ull) ^ (unsigned)(i >> 13) * 40503u ^ (unsigned)(i >> 32) * 97u;
  h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
  return h;
}
__global__ void init(float* p, long long n, unsigned seed) {  // N(0, 1) by Box-Muller
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float u1 = (hash(2 * i + seed * 0x9e3779b97f4aull) + 1.f) / 4294967296.f;
    const float u2 = hash(2 * i + 1 + seed * 0x9e3779b97f4aull) / 4294967296.f;
    p[i] = sqrtf(-2.f * logf(u1)) * cosf(6.2831853f * u2);
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
__global__ void ex2_check(const float* t, float* poly, float* mufu, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    poly[i] = kf_ex2_poly(t[i]);
    float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t[i])); mufu[i] = y;
  }
}
static double bf2d(unsigned short b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
static double ulp_err(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e30;
  if (std::isinf(want)) return got == want ? 0 : 1e30;
  if (want < 1.17549435e-38) return std::fabs(got - want) < 1.2e-38 ? 0 : 1e30;
  int e; std::frexp(want, &e);
  return std::fabs(got - want) / std::ldexp(1.0, e - 24);
}
int main(int argc, char** argv) {
  const long long R = argc > 1 ? atoll(argv[1]) : 2670, n = R * W;
  const bool wflush = getenv("FLUSH_WRITE") != nullptr;
  // kf_ex2_poly and ex2.approx against exp2 in fp64.
  {
    const long long m = 1 << 22;
    std::vector<float> t(m);
    for (long long i = 0; i < m; ++i) t[i] = -140.f + 280.f * (float)i / m;
    const float sp[] = {0.f, -0.f, 1.f, -1.f, 0.5f, -0.5f, 127.f, 127.49f, 128.f, 200.f, -126.f, -126.4f, -126.6f, -127.f, -200.f, INFINITY, -INFINITY, NAN};
    for (int i = 0; i < (int)(sizeof sp / sizeof sp[0]); ++i) t[i] = sp[i];
    float *dt, *dp, *dm; cudaMalloc(&dt, m * 4); cudaMalloc(&dp, m * 4); cudaMalloc(&dm, m * 4);
    cudaMemcpy(dt, t.data(), m * 4, cudaMemcpyHostToDevice);
    ex2_check<<<512, 256>>>(dt, dp, dm, m);
    std::vector<float> p(m), q(m);
    cudaMemcpy(p.data(), dp, m * 4, cudaMemcpyDeviceToHost); cudaMemcpy(q.data(), dm, m * 4, cudaMemcpyDeviceToHost);
    double ep = 0, em = 0; long long bad = 0;
    for (long long i = 0; i < m; ++i) {
      const double w = std::exp2((double)t[i]);
      if (t[i] >= -126.f && t[i] < 127.4f) { ep = std::max(ep, ulp_err(p[i], w)); em = std::max(em, ulp_err(q[i], w)); }
    }
    for (int i = 0; i < (int)(sizeof sp / sizeof sp[0]); ++i) {
      printf("  ex2(%g): poly %.9g mufu %.9g exact %.9g\n", sp[i], p[i], q[i], std::exp2((double)sp[i]));
      if (std::isnan(sp[i]) != std::isnan(p[i])) ++bad;
    }
    printf("ex2 over [-126, 127.4): poly max %.3f ulp, ex2.approx max %.3f ulp; nan mismatches %lld\n", ep, em, bad);
    cudaFree(dt); cudaFree(dp); cudaFree(dm);
  }
  float *x32, *o32; unsigned short *x16, *o16; int4* fl; int* sink; unsigned* ctr;
  cudaMalloc(&x32, n * 4); cudaMalloc(&x16, n * 2); cudaMalloc(&o32, n * 4); cudaMalloc(&o16, n * 2);
  cudaMalloc(&fl, 256 << 20); cudaMalloc(&sink, 4); cudaMalloc(&ctr, 4);
  init<<<1024, 256>>>(x32, n, 7); to_bf16<<<1024, 256>>>(x32, x16, n);
  cudaMemset(fl, 1, 256 << 20);
  std::vector<float> h32(n); std::vector<unsigned short> h16(n);
  cudaMemcpy(h32.data(), x32, n * 4, cudaMemcpyDeviceToHost); cudaMemcpy(h16.data(), x16, n * 2, cudaMemcpyDeviceToHost);
  const long long sample[] = {0, 1, 2, 131, 132, 133, 500, 1000, R / 2, R - 3, R - 2, R - 1};
  auto ref = [&](bool bf, long long r, std::vector<double>& p) {
    p.resize(W); double m = -INFINITY, s = 0;
    for (long long c = 0; c < W; ++c) { p[c] = bf ? bf2d(h16[r * W + c]) : h32[r * W + c]; m = std::max(m, p[c]); }
    for (long long c = 0; c < W; ++c) { p[c] = std::exp(p[c] - m); s += p[c]; }
    for (long long c = 0; c < W; ++c) p[c] /= s;
  };
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> f0rows;  // F0's sampled rows, for the bit comparison
  auto run = [&](const char* name, bool bf, auto launch) {
    std::vector<float> t;
    cudaMemset(bf ? (void*)o16 : (void*)o32, 0xff, n * (bf ? 2 : 4));
    for (int i = 0; i < 23; ++i) {
      if (wflush) cudaMemsetAsync(fl, 0, 256 << 20); else flush<<<1056, 512>>>(fl, (256 << 20) / 16, sink);
      cudaMemsetAsync(ctr, 0, 4);
      cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    const cudaError_t e = cudaGetLastError();
    double err = 0; std::vector<double> p; std::vector<float> y32(W); std::vector<unsigned short> y16(W);
    long long ndiff = 0, si = 0;
    if (strncmp(name, "memcpy", 6)) {
      for (long long r : sample) {
        ref(bf, r, p);
        if (bf) cudaMemcpy(y16.data(), o16 + r * W, W * 2, cudaMemcpyDeviceToHost);
        else cudaMemcpy(y32.data(), o32 + r * W, W * 4, cudaMemcpyDeviceToHost);
        if (!bf) {
          if (!strcmp(name, "F0")) { if ((long long)f0rows.size() < (si + 1) * W) f0rows.resize((si + 1) * W); memcpy(&f0rows[si * W], y32.data(), W * 4); }
          else if ((long long)f0rows.size() >= (si + 1) * W) for (long long c = 0; c < W; ++c) ndiff += memcmp(&f0rows[si * W + c], &y32[c], 4) != 0;
          ++si;
        }
        for (long long c = 0; c < W; ++c) {
          const double g = bf ? bf2d(y16[c]) : y32[c];
          err = std::max(err, std::isnan(g) ? 1e30 : std::fabs(g - p[c]));
        }
      }
    }
    const double bytes = 2.0 * n * (bf ? 2 : 4);
    printf("%-6s R=%lld: best %6.1f us median %6.1f us, %5.0f GB/s median; max err %.4g; %lld sampled outputs differ from F0's; %s\n", name, R, t[0],
           t[t.size() / 2], bytes / t[t.size() / 2] / 1e3, err, ndiff, cudaGetErrorString(e));
    fflush(stdout);
  };
  printf("flush by %s\n", wflush ? "a 256 MB memset" : "reads");
  run("memcpy16", true, [&] { cudaMemcpyAsync(o16, x16, n * 2, cudaMemcpyDeviceToDevice); });
  run("memcpy32", false, [&] { cudaMemcpyAsync(o32, x32, n * 4, cudaMemcpyDeviceToDevice); });
#define SET(NSP, SM) cudaFuncSetAttribute(NSP::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, SM)
#define RUN16(NSP, T) SET(NSP, 201216); run(#NSP, true, [&] { NSP::kf_entry<<<(unsigned)std::min<long long>(R, 132), T, 201216>>>((const NSP::__kf_bf16*)x16, (NSP::__kf_bf16*)o16, R, ctr); })
#define RUN32(NSP, T) SET(NSP, 201088); run(#NSP, false, [&] { NSP::kf_entry<<<(unsigned)std::min<long long>(R, 132), T, 201088>>>(x32, o32, R, ctr); })
  if (getenv("LONG")) {  // The GPU busy for a while first: the same kernels after 0.5 s of launches.
    for (int i = 0; i < 1500; ++i) B0::kf_entry<<<132, 1024, 201216>>>((const B0::__kf_bf16*)x16, (B0::__kf_bf16*)o16, 0, ctr);
    flush<<<1056, 512>>>(fl, (256 << 20) / 16, sink);
    for (int i = 0; i < 600; ++i) flush<<<1056, 512>>>(fl, (256 << 20) / 16, sink);
  }
  for (int rep = 0; rep < 2; ++rep) {
    // run110: B0 B1 B2 B3 B0h B1h B2h, F0 F1 F3 F5 F6 F0h F5h F6h (F1 = inv, F5 = chunk, F6 = inv,fast,chunk).
    RUN16(B0, 1024); RUN16(B0h, 512);
    if (!getenv("LONG")) { RUN16(B1, 1024); RUN16(B2h, 512); RUN16(B1h, 512); }
    RUN32(F0, 1024); RUN32(F10, 1024); RUN32(F9, 1024); RUN32(F12, 1024);
    RUN32(F3, 1024); RUN32(F7, 1024); RUN32(F8, 1024); RUN32(F7h, 512);
  }
}
