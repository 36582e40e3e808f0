// matmul/5 kernels (from 9c5e8b8's generator) that faulted on the H200, without the flag (x0),
// as generated (x), and with the policy made by an asm volatile createpolicy (xv): one launch
// each, in its own process (argv[1]); "time" times c10, c7 and c1v after a 256 MB memset.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
namespace e10 {
#include "e10.cu"
}
namespace e7 {
#include "e7.cu"
}
namespace e1v {
#include "e1v.cu"
}
namespace f10 {
#include "f10.cu"
}
namespace f7 {
#include "f7.cu"
}
namespace f1v {
#include "f1v.cu"
}
namespace c10 {
#include "c10.cu"
}
namespace c7 {
#include "c7.cu"
}
namespace c1v {
#include "c1v.cu"
}
typedef unsigned short u16;
__global__ void fill(u16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = (u16)(__float_as_uint(((h & 0xffff) / 65536.f - 0.5f) * 2.f) >> 16);
  }
}
int main(int argc, char** argv) {
  const char* which = argv[1];
  u16 *A, *B, *bias, *out; float* ws; int* cnt;
  cudaMalloc(&A, 64 * 8192 * 2); cudaMalloc(&B, (size_t)8192 * 8192 * 2); cudaMalloc(&bias, 8192 * 2); cudaMalloc(&out, 64 * 8192 * 2);
  cudaMalloc(&ws, 64 << 20); cudaMalloc(&cnt, 1 << 20); cudaMemset(cnt, 0, 1 << 20);
  fill<<<1024, 256>>>(A, 64 * 8192, 1); fill<<<1024, 256>>>(B, (size_t)8192 * 8192, 2); fill<<<32, 256>>>(bias, 8192, 3);
  void* fl; cudaMalloc(&fl, 256 << 20);
  cudaDeviceSynchronize();
  auto launch_e10 = [&] { cudaFuncSetAttribute(e10::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    e10::kf_entry<<<dim3(3, 1), 256, 73728>>>((const e10::__kf_bf16*)A, (const e10::__kf_bf16*)B, (const e10::__kf_bf16*)bias, (e10::__kf_bf16*)out); };
  if (!strcmp(which, "e10")) { launch_e10(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "e10", 200, 264, 520, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_e1 = [&] { cudaFuncSetAttribute(e7::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    e7::kf_entry<<<dim3(3, 1), 256, 73728>>>((const e7::__kf_bf16*)A, (const e7::__kf_bf16*)B, (const e7::__kf_bf16*)bias, (e7::__kf_bf16*)out); };
  if (!strcmp(which, "e7")) { launch_e1(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "e7", 200, 264, 520, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_e1v = [&] { cudaFuncSetAttribute(e1v::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    e1v::kf_entry<<<dim3(3, 1), 256, 73728>>>((const e1v::__kf_bf16*)A, (const e1v::__kf_bf16*)B, (const e1v::__kf_bf16*)bias, (e1v::__kf_bf16*)out); };
  if (!strcmp(which, "e1v")) { launch_e1v(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "e1v", 200, 264, 520, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_f10 = [&] { cudaFuncSetAttribute(f10::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73744);
    f10::kf_entry<<<dim3(8, 16), 128, 73744>>>((const f10::__kf_bf16*)A, (const f10::__kf_bf16*)B, (const f10::__kf_bf16*)bias, (f10::__kf_bf16*)out, ws, cnt); };
  if (!strcmp(which, "f10")) { launch_f10(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "f10", 16, 1024, 4096, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_f1 = [&] { cudaFuncSetAttribute(f7::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73744);
    f7::kf_entry<<<dim3(8, 16), 128, 73744>>>((const f7::__kf_bf16*)A, (const f7::__kf_bf16*)B, (const f7::__kf_bf16*)bias, (f7::__kf_bf16*)out, ws, cnt); };
  if (!strcmp(which, "f7")) { launch_f1(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "f7", 16, 1024, 4096, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_f1v = [&] { cudaFuncSetAttribute(f1v::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73744);
    f1v::kf_entry<<<dim3(8, 16), 128, 73744>>>((const f1v::__kf_bf16*)A, (const f1v::__kf_bf16*)B, (const f1v::__kf_bf16*)bias, (f1v::__kf_bf16*)out, ws, cnt); };
  if (!strcmp(which, "f1v")) { launch_f1v(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "f1v", 16, 1024, 4096, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_c10 = [&] { cudaFuncSetAttribute(c10::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 98304);
    c10::kf_entry<<<dim3(64, 2), 256, 98304>>>((const c10::__kf_bf16*)A, (const c10::__kf_bf16*)B, (const c10::__kf_bf16*)bias, (c10::__kf_bf16*)out); };
  if (!strcmp(which, "c10")) { launch_c10(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "c10", 64, 8192, 8192, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_c1 = [&] { cudaFuncSetAttribute(c7::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 98304);
    c7::kf_entry<<<dim3(64, 2), 256, 98304>>>((const c7::__kf_bf16*)A, (const c7::__kf_bf16*)B, (const c7::__kf_bf16*)bias, (c7::__kf_bf16*)out); };
  if (!strcmp(which, "c7")) { launch_c1(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "c7", 64, 8192, 8192, cudaGetErrorString(e)); return e != cudaSuccess; }
  auto launch_c1v = [&] { cudaFuncSetAttribute(c1v::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 98304);
    c1v::kf_entry<<<dim3(64, 2), 256, 98304>>>((const c1v::__kf_bf16*)A, (const c1v::__kf_bf16*)B, (const c1v::__kf_bf16*)bias, (c1v::__kf_bf16*)out); };
  if (!strcmp(which, "c1v")) { launch_c1v(); cudaError_t e = cudaDeviceSynchronize();
    printf("%-4s M %d N %d K %d: %s\n", "c1v", 64, 8192, 8192, cudaGetErrorString(e)); return e != cudaSuccess; }
  if (!strcmp(which, "time")) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    auto t = [&](const char* name, auto f) {
      std::vector<float> v;
      for (int i = 0; i < 25; ++i) {
        cudaMemsetAsync(fl, 0, 256 << 20); cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 5) v.push_back(ms * 1000);
      }
      std::sort(v.begin(), v.end());
      printf("%-4s after the memset: median %.1f us; %s\n", name, v[v.size() / 2], cudaGetErrorString(cudaGetLastError()));
    };
    t("c10", launch_c10); t("c7", launch_c1); t("c1v", launch_c1v);
  }
}
