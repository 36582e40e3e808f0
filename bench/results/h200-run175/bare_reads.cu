// Bare strip reads of the 8192 x 8192 bf16 weights: CTA c reads columns
// [64c, 64c + 64) of every row, 16 loads of 16 bytes in flight a thread.
extern "C" __global__ void __launch_bounds__(256) kf_entry_br2(const unsigned short* x, const unsigned short* w,
                                                                const unsigned short* b, unsigned short* o) {
  const int t = threadIdx.x, col = blockIdx.x * 64 + (t & 7) * 8;
  const unsigned short* p = w + (size_t)(t >> 3) * 8192 + col;
  unsigned a = 0;
  for (int s = 0; s < 256; s += 16) {
    unsigned v[16][4];
#pragma unroll
    for (int u = 0; u < 16; ++u)
      asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[u][0]), "=r"(v[u][1]), "=r"(v[u][2]), "=r"(v[u][3]) : "l"(p + (size_t)(s + u) * 32 * 8192));
#pragma unroll
    for (int u = 0; u < 16; ++u) a ^= v[u][0] ^ v[u][1] ^ v[u][2] ^ v[u][3];
  }
  if (a == 0x9e3779b9u) o[blockIdx.x] = (unsigned short)a;
}
