// The gemm_bf16_edges case (200 x 264 x 520) of GpuMatmulTest's first
// variant, with B copied evict-first (e1) and plainly (e0).
#include <cstdio>
#include <cuda_runtime.h>
namespace e0 {
#include "e0.cu"
}
namespace e1 {
#include "e1.cu"
}
int main() {
  const int M = 200, N = 264, K = 520;
  unsigned short *A, *B, *bias, *out;
  cudaMalloc(&A, M * K * 2); cudaMalloc(&B, K * N * 2); cudaMalloc(&bias, N * 2); cudaMalloc(&out, M * N * 2);
  cudaMemset(A, 0x3f, M * K * 2); cudaMemset(B, 0x3f, K * N * 2); cudaMemset(bias, 0, N * 2);
  for (int which = 0; which < 2; ++which) {
    cudaError_t e;
    if (which == 0) {
      cudaFuncSetAttribute(e0::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
      e0::kf_entry<<<3, 256, 73728>>>((const e0::__kf_bf16*)A, (const e0::__kf_bf16*)B, (const e0::__kf_bf16*)bias, (e0::__kf_bf16*)out);
    } else {
      cudaFuncSetAttribute(e1::kf_entry, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728);
      e1::kf_entry<<<3, 256, 73728>>>((const e1::__kf_bf16*)A, (const e1::__kf_bf16*)B, (const e1::__kf_bf16*)bias, (e1::__kf_bf16*)out);
    }
    e = cudaDeviceSynchronize();
    printf("e%d (kf_B_ONCE = %s): %s\n", which, which ? "true" : "false", cudaGetErrorString(e));
    if (e != cudaSuccess) return 1;
  }
}
