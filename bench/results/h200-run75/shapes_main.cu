#include <cstdio>
#include <cuda_runtime.h>
namespace f0 {
#include "f0.cu"
}
namespace f1 {
#include "f1.cu"
}
namespace f2 {
#include "f2.cu"
}
namespace f3 {
#include "f3.cu"
}
namespace f4 {
#include "f4.cu"
}
#include <cstdlib>
int main(int argc, char** argv) {
  const int only = atoi(argv[1]);
  unsigned short *A, *B, *bias, *out;
  cudaMalloc(&A, 256 * 520 * 2); cudaMalloc(&B, 520 * 264 * 2); cudaMalloc(&bias, 264 * 2); cudaMalloc(&out, 256 * 264 * 2);
  cudaMemset(A, 0x3f, 256 * 520 * 2); cudaMemset(B, 0x3f, 520 * 264 * 2);
  if (only == 0) { cudaFuncSetAttribute(f0::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    f0::kf_entry<<<2, 256, 73728>>>((const f0::__kf_bf16*)A, (const f0::__kf_bf16*)B, (const f0::__kf_bf16*)bias, (f0::__kf_bf16*)out);
    cudaError_t e = cudaDeviceSynchronize(); printf("M %d N %d K %d: %s\n", 200, 256, 512, cudaGetErrorString(e)); if (e) return 1; }
  if (only == 1) { cudaFuncSetAttribute(f1::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    f1::kf_entry<<<3, 256, 73728>>>((const f1::__kf_bf16*)A, (const f1::__kf_bf16*)B, (const f1::__kf_bf16*)bias, (f1::__kf_bf16*)out);
    cudaError_t e = cudaDeviceSynchronize(); printf("M %d N %d K %d: %s\n", 256, 264, 520, cudaGetErrorString(e)); if (e) return 1; }
  if (only == 2) { cudaFuncSetAttribute(f2::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    f2::kf_entry<<<3, 256, 73728>>>((const f2::__kf_bf16*)A, (const f2::__kf_bf16*)B, (const f2::__kf_bf16*)bias, (f2::__kf_bf16*)out);
    cudaError_t e = cudaDeviceSynchronize(); printf("M %d N %d K %d: %s\n", 200, 264, 512, cudaGetErrorString(e)); if (e) return 1; }
  if (only == 3) { cudaFuncSetAttribute(f3::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    f3::kf_entry<<<2, 256, 73728>>>((const f3::__kf_bf16*)A, (const f3::__kf_bf16*)B, (const f3::__kf_bf16*)bias, (f3::__kf_bf16*)out);
    cudaError_t e = cudaDeviceSynchronize(); printf("M %d N %d K %d: %s\n", 200, 256, 520, cudaGetErrorString(e)); if (e) return 1; }
  if (only == 4) { cudaFuncSetAttribute(f4::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
    f4::kf_entry<<<2, 256, 73728>>>((const f4::__kf_bf16*)A, (const f4::__kf_bf16*)B, (const f4::__kf_bf16*)bias, (f4::__kf_bf16*)out);
    cudaError_t e = cudaDeviceSynchronize(); printf("M %d N %d K %d: %s\n", 256, 256, 512, cudaGetErrorString(e)); if (e) return 1; }
}
