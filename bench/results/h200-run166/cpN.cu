// A copy of rows x 4096 bf16 values, 16 bytes a thread a step, grid-stride,
// 4 loads in flight a thread.
extern "C" __global__ void __launch_bounds__(512) kf_copy(const unsigned short* __restrict__ in0, unsigned short* __restrict__ out0, const long long rows) {
  const long long n = rows * 4096 / 8;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i0 = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  for (; i0 < n; i0 += 4 * stride) {
    uint4 r[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const long long i = i0 + k * stride;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (i < n) { asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(reinterpret_cast<const uint4*>(in0) + i)); }
      r[k] = v;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const long long i = i0 + k * stride;
      if (i < n) reinterpret_cast<uint4*>(out0)[i] = r[k];
    }
  }
}
