#include "codegen/tensor_core.h"

namespace kfuse {

// Tiles of 16-bit elements live in shared memory as rows of COLS elements
// (the operand's contiguous dim).
const char kTensorCoreBlocks[] = R"(__device__ __forceinline__ void kf_cp16(unsigned dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
template <typename T>
struct alignas(2 * sizeof(T)) kf_pair { T a, b; };
__device__ __forceinline__ void kf_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void kf_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void kf_ldm4(unsigned* r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void kf_ldm4t(unsigned* r, unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void kf_mma(float* c, const unsigned* a, const unsigned* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." KF_AB "." KF_AB ".f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <int COLS>
__device__ __forceinline__ int kf_swz(int row, int col) {
  constexpr int CH = COLS / 8;
  const int x = CH >= 8 ? (row & 7) : CH == 4 ? ((row >> 1) & 3) : ((row >> 2) & 1);
  return row * COLS + (((col >> 3) ^ x) << 3) + (col & 7);
}
// Copies a ROWS x COLS tile whose COLS are contiguous in global memory (rows
// `ld` elements apart) from global (row0, col0); chunks at or past
// (nrows, ncols) are zero-filled. When the block's threads cover whole rows,
// each thread keeps one column and steps down rows, so its address and
// swizzle arithmetic is a constant stride the compiler hoists out of the
// K loop.
template <int ROWS, int COLS>
__device__ __forceinline__ void kf_load_tile(unsigned dst, const unsigned short* g, long long ld,
                                             long long row0, long long col0, long long nrows,
                                             long long ncols, int tid) {
  constexpr int CH = COLS / 8, TOTAL = ROWS * CH;
  if constexpr (kf_THREADS % CH == 0 && TOTAL % kf_THREADS == 0) {
    constexpr int RSTEP = kf_THREADS / CH;
    const int r0 = tid / CH, c = (tid % CH) * 8;
    const long long gc = col0 + c;
    const unsigned short* p = g + (row0 + r0) * ld + gc;
#pragma unroll
    for (int it = 0; it < TOTAL / kf_THREADS; ++it) {
      const int r = r0 + it * RSTEP;
      const bool ok = row0 + r < nrows && gc < ncols;
      kf_cp16(dst + 2 * kf_swz<COLS>(r, c), ok ? p + it * (RSTEP * ld) : g, ok ? 16 : 0);
    }
  } else {
#pragma unroll
    for (int it = 0; it < (TOTAL + kf_THREADS - 1) / kf_THREADS; ++it) {
      const int i = it * kf_THREADS + tid;
      if (TOTAL % kf_THREADS == 0 || i < TOTAL) {
        const int r = i / CH, c = (i % CH) * 8;
        const long long gr = row0 + r, gc = col0 + c;
        const bool ok = gr < nrows && gc < ncols;
        kf_cp16(dst + 2 * kf_swz<COLS>(r, c), ok ? g + gr * ld + gc : g, ok ? 16 : 0);
      }
    }
  }
}
)";

}  // namespace kfuse
