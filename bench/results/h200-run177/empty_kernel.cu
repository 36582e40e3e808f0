// An empty kernel of the streamed M = 16 kernel's launch shape: what a launch
// costs after each flush, outside any work.
extern "C" __global__ void __launch_bounds__(256) kf_entry_e0(const unsigned short* x, const unsigned short* w,
                                                              const unsigned short* b, unsigned short* o) {
  extern __shared__ unsigned char smem[];
  if (threadIdx.x == 0 && x == nullptr) o[blockIdx.x] = smem[0];
}
