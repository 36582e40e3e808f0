// Register-resident row kernels (generated, the suite's tuned variants) with their
// full-row stores and row loads under L2 policies, beside cudaMemcpy of the same bytes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
namespace rms32_A {
#include "rms32_A.cu"
}
namespace rms32_B {
#include "rms32_B.cu"
}
namespace rms32_C {
#include "rms32_C.cu"
}
namespace rms32_D {
#include "rms32_D.cu"
}
namespace rms32_E {
#include "rms32_E.cu"
}
namespace rms16_A {
#include "rms16_A.cu"
}
namespace rms16_B {
#include "rms16_B.cu"
}
namespace rms16_C {
#include "rms16_C.cu"
}
namespace rms16_D {
#include "rms16_D.cu"
}
namespace rms16_E {
#include "rms16_E.cu"
}
namespace ln32_A {
#include "ln32_A.cu"
}
namespace ln32_B {
#include "ln32_B.cu"
}
namespace ln32_C {
#include "ln32_C.cu"
}
namespace ln32_D {
#include "ln32_D.cu"
}
namespace ln32_E {
#include "ln32_E.cu"
}
namespace sm16_A {
#include "sm16_A.cu"
}
namespace sm16_B {
#include "sm16_B.cu"
}
namespace sm16_C {
#include "sm16_C.cu"
}
namespace sm16_D {
#include "sm16_D.cu"
}
namespace sm16_E {
#include "sm16_E.cu"
}

__global__ void fill32(float* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = ((h & 0xffffff) / 16777216.f - 0.5f) * 6.f;
  }
}
__global__ void to16(const float* f, unsigned short* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (unsigned short)(__float_as_uint(f[i]) >> 16);
}
__global__ void flush(const int4* p, long long n, int* sink) {
  int acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) acc ^= p[i].x;
  if (acc == 0x12345678) *sink = acc;
}
int main() {
  const bool wflush = getenv("FLUSH_WRITE") != nullptr;
  const size_t maxn = (size_t)32768 * 4096;
  float *x, *w, *b, *o[5]; unsigned short *xh, *wh, *oh[5]; int4* fl; int* sink;
  cudaMalloc(&x, maxn * 4); cudaMalloc(&w, 8192 * 4); cudaMalloc(&b, 8192 * 4); cudaMalloc(&xh, maxn * 2); cudaMalloc(&wh, 8192 * 2);
  for (int i = 0; i < 5; ++i) { cudaMalloc(&o[i], maxn * 4); cudaMalloc(&oh[i], maxn * 2); }
  cudaMalloc(&fl, 256 << 20); cudaMalloc(&sink, 4);
  fill32<<<1024, 256>>>(x, maxn, 1); fill32<<<8, 256>>>(w, 8192, 2); fill32<<<8, 256>>>(b, 8192, 3);
  to16<<<1024, 256>>>(x, xh, maxn); to16<<<8, 256>>>(w, wh, 8192);
  cudaMemset(fl, 1, 256 << 20);
  cudaEvent_t ea, eb; cudaEventCreate(&ea); cudaEventCreate(&eb);
  auto run = [&](const char* name, double bytes, auto launch) {
    std::vector<float> t;
    static const int reps = getenv("REPS") ? atoi(getenv("REPS")) : 25;
    for (int i = 0; i < reps; ++i) {
      if (wflush) cudaMemsetAsync(fl, 0, 256 << 20); else flush<<<1056, 512>>>(fl, (256 << 20) / 16, sink);
      cudaEventRecord(ea); launch(); cudaEventRecord(eb); cudaEventSynchronize(eb);
      float ms; cudaEventElapsedTime(&ms, ea, eb); if (i >= std::min(5, reps - 1)) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    printf("%-42s best %6.1f us median %6.1f us %5.0f GB/s; %s\n", name, t[0], t[t.size() / 2], bytes / t[t.size() / 2] / 1e3,
           cudaGetErrorString(cudaGetLastError()));
  };
  printf("flush by %s\n", wflush ? "a 256 MB memset" : "reads");
  auto same = [&](const char* c, void* const* outs, size_t bytes) {
    std::vector<char> a(bytes), q(bytes); cudaMemcpy(a.data(), outs[0], bytes, cudaMemcpyDeviceToHost);
    int diff = 0; for (int i = 1; i < 5; ++i) { cudaMemcpy(q.data(), outs[i], bytes, cudaMemcpyDeviceToHost); diff += memcmp(a.data(), q.data(), bytes) != 0; }
    printf("%s: %d of 4 policy variants differ from the generated kernel's output\n", c, diff);
  };

  run("memcpy, rms_norm f32 4096", 2.0 * 134217728 * 4, [&] { cudaMemcpyAsync(o[0], x, 134217728ull * 4, cudaMemcpyDeviceToDevice); });
  run("rms_norm f32 4096: as generated", 2.0 * 134217728 * 4, [&] { rms32_A::kf_entry<<<32768, 512>>>((const float*)x, (const float*)w, (float*)o[0]); });
  run("rms_norm f32 4096: stores evict-first", 2.0 * 134217728 * 4, [&] { rms32_B::kf_entry<<<32768, 512>>>((const float*)x, (const float*)w, (float*)o[1]); });
  run("rms_norm f32 4096: stores .cs", 2.0 * 134217728 * 4, [&] { rms32_C::kf_entry<<<32768, 512>>>((const float*)x, (const float*)w, (float*)o[2]); });
  run("rms_norm f32 4096: ld.nc evict-first + st ef", 2.0 * 134217728 * 4, [&] { rms32_D::kf_entry<<<32768, 512>>>((const float*)x, (const float*)w, (float*)o[3]); });
  run("rms_norm f32 4096: ld.nc no-alloc + st ef", 2.0 * 134217728 * 4, [&] { rms32_E::kf_entry<<<32768, 512>>>((const float*)x, (const float*)w, (float*)o[4]); });
  { void* outs[5] = {o[0], o[1], o[2], o[3], o[4]}; same("rms_norm f32 4096", outs, 134217728ull * 4); }
  run("memcpy, rms_norm bf16 8192", 2.0 * 134217728 * 2, [&] { cudaMemcpyAsync(oh[0], xh, 134217728ull * 2, cudaMemcpyDeviceToDevice); });
  run("rms_norm bf16 8192: as generated", 2.0 * 134217728 * 2, [&] { rms16_A::kf_entry<<<16384, 256>>>((const rms16_A::__kf_bf16*)xh, (const rms16_A::__kf_bf16*)wh, (rms16_A::__kf_bf16*)oh[0]); });
  run("rms_norm bf16 8192: stores evict-first", 2.0 * 134217728 * 2, [&] { rms16_B::kf_entry<<<16384, 256>>>((const rms16_B::__kf_bf16*)xh, (const rms16_B::__kf_bf16*)wh, (rms16_B::__kf_bf16*)oh[1]); });
  run("rms_norm bf16 8192: stores .cs", 2.0 * 134217728 * 2, [&] { rms16_C::kf_entry<<<16384, 256>>>((const rms16_C::__kf_bf16*)xh, (const rms16_C::__kf_bf16*)wh, (rms16_C::__kf_bf16*)oh[2]); });
  run("rms_norm bf16 8192: ld.nc evict-first + st ef", 2.0 * 134217728 * 2, [&] { rms16_D::kf_entry<<<16384, 256>>>((const rms16_D::__kf_bf16*)xh, (const rms16_D::__kf_bf16*)wh, (rms16_D::__kf_bf16*)oh[3]); });
  run("rms_norm bf16 8192: ld.nc no-alloc + st ef", 2.0 * 134217728 * 2, [&] { rms16_E::kf_entry<<<16384, 256>>>((const rms16_E::__kf_bf16*)xh, (const rms16_E::__kf_bf16*)wh, (rms16_E::__kf_bf16*)oh[4]); });
  { void* outs[5] = {oh[0], oh[1], oh[2], oh[3], oh[4]}; same("rms_norm bf16 8192", outs, 134217728ull * 2); }
  run("memcpy, layer_norm f32 8192", 2.0 * 134217728 * 4, [&] { cudaMemcpyAsync(o[0], x, 134217728ull * 4, cudaMemcpyDeviceToDevice); });
  run("layer_norm f32 8192: as generated", 2.0 * 134217728 * 4, [&] { ln32_A::kf_entry<<<16384, 512>>>((const float*)x, (const float*)w, (const float*)b, (float*)o[0]); });
  run("layer_norm f32 8192: stores evict-first", 2.0 * 134217728 * 4, [&] { ln32_B::kf_entry<<<16384, 512>>>((const float*)x, (const float*)w, (const float*)b, (float*)o[1]); });
  run("layer_norm f32 8192: stores .cs", 2.0 * 134217728 * 4, [&] { ln32_C::kf_entry<<<16384, 512>>>((const float*)x, (const float*)w, (const float*)b, (float*)o[2]); });
  run("layer_norm f32 8192: ld.nc evict-first + st ef", 2.0 * 134217728 * 4, [&] { ln32_D::kf_entry<<<16384, 512>>>((const float*)x, (const float*)w, (const float*)b, (float*)o[3]); });
  run("layer_norm f32 8192: ld.nc no-alloc + st ef", 2.0 * 134217728 * 4, [&] { ln32_E::kf_entry<<<16384, 512>>>((const float*)x, (const float*)w, (const float*)b, (float*)o[4]); });
  { void* outs[5] = {o[0], o[1], o[2], o[3], o[4]}; same("layer_norm f32 8192", outs, 134217728ull * 4); }
  run("memcpy, softmax bf16 4096", 2.0 * 134217728 * 2, [&] { cudaMemcpyAsync(oh[0], xh, 134217728ull * 2, cudaMemcpyDeviceToDevice); });
  run("softmax bf16 4096: as generated", 2.0 * 134217728 * 2, [&] { sm16_A::kf_entry<<<8192, 128>>>((const sm16_A::__kf_bf16*)xh, (sm16_A::__kf_bf16*)oh[0]); });
  run("softmax bf16 4096: stores evict-first", 2.0 * 134217728 * 2, [&] { sm16_B::kf_entry<<<8192, 128>>>((const sm16_B::__kf_bf16*)xh, (sm16_B::__kf_bf16*)oh[1]); });
  run("softmax bf16 4096: stores .cs", 2.0 * 134217728 * 2, [&] { sm16_C::kf_entry<<<8192, 128>>>((const sm16_C::__kf_bf16*)xh, (sm16_C::__kf_bf16*)oh[2]); });
  run("softmax bf16 4096: ld.nc evict-first + st ef", 2.0 * 134217728 * 2, [&] { sm16_D::kf_entry<<<8192, 128>>>((const sm16_D::__kf_bf16*)xh, (sm16_D::__kf_bf16*)oh[3]); });
  run("softmax bf16 4096: ld.nc no-alloc + st ef", 2.0 * 134217728 * 2, [&] { sm16_E::kf_entry<<<8192, 128>>>((const sm16_E::__kf_bf16*)xh, (sm16_E::__kf_bf16*)oh[4]); });
  { void* outs[5] = {oh[0], oh[1], oh[2], oh[3], oh[4]}; same("softmax bf16 4096", outs, 134217728ull * 2); }
}
