// gemv_bench.cu -- weight-streaming bandwidth study for small-batch GEMV on H200 (sm_90a).
//
// Problem: y[M,N] = gelu_tanh(x[M,K] @ W[K,N] + bias[N]), bf16 in/out, f32 accumulation,
// W row-major [K,N] (N contiguous), K = N = 8192, so W = 128 MiB (far above the 50 MB L2).
// M in {1, 16, 64}.  The figure of merit is "weight GB/s" = 128 MiB / time of the whole op.
//
// Question: is ~3.0 TB/s caused by every CTA reading a 128-byte-wide column strip of every
// 16 KiB weight row (many short runs scattered over DRAM pages), and do CTAs that read long
// contiguous runs per row (>= 1 KiB) or whole contiguous panels get 3.5+ TB/s?
//
// Part 1 (pure reads, no math): every kernel reads each byte of a 128 MiB buffer exactly once
//   with 16-byte loads and XOR-reduces into one value per thread (written once, so the loads
//   are live).  Patterns:
//     (a) fully contiguous (grid-stride, and contiguous per-CTA row panels),
//     (b) 128 CTAs, CTA c reads bytes [c*128, c*128+128) of every 16 KiB row (current scheme),
//         plus variants with more loads in flight / L2 256B prefetch hint as controls,
//     (c) strips of 256 B .. 4 KiB, CTAs also split over K so that there are 128 CTAs,
//     (d) as (c) but with 512 and 1024 CTAs (about 4 and 8 per SM).
// Part 2 (real op): split-K GEMV on tensor cores (mma.sync m16n8k16 bf16, f32 accumulate).
//   Each CTA owns a panel = [K-slice] x [CW columns]; every warp streams 64 columns
//   (128 B of each row) of the panel with cp.async 16-byte copies into a private per-lane
//   smem ring (ST units in flight), so all warps of a CTA together read CW*2 contiguous bytes
//   of each weight row.  K-slices are combined by one of:
//     atomic+memset   : f32 red.add into a workspace zeroed by cudaMemsetAsync (in timing),
//                       last CTA of a column block (ticket counter) applies bias+GELU,
//                       stores bf16 and resets its ticket to 0;
//     atomic+selfclean: same, but the last CTA re-zeroes the workspace after reading it,
//                       so no memset launch is needed;
//     ordered-slices  : no atomics on data; partials go to [S,M,N] f32 and the last CTA
//                       sums slices 0..S-1 in order (bitwise deterministic);
//     stream-only     : partials written, no cross-CTA combine (upper bound, not checked).
//   M = 1 uses the same kernel with the A tile zero-padded to 16 rows (tensor-core work is
//   still far below the streaming time).  Per panel width, K-slice counts S are chosen from
//   the measured occupancy: ~1 CTA per SM, one full wave, and four full waves (uneven
//   slices allowed); the 128-byte-strip baseline (64 columns per CTA) uses S = 1 (128 CTAs,
//   the current scheme) and S = 4 (same strips, 512 CTAs) to separate strip width from
//   parallelism.
// Timing: 3 warm-up runs, then 20 runs each bracketed by its own cudaEvent pair; best and
//   median are reported.  Three identical 128 MiB copies of W are used round-robin, so a run
//   never finds its own weights left in L2 by the previous run.  An empty kernel gives the
//   event-to-event floor.  GEMV times include everything in the op (memset, kernel).
// Part 3: every checked run is compared (all M*N outputs) to a simple GPU reference that is
//   itself validated against a host f64 reference, and (sampled outputs) directly against the
//   host f64 reference.  Any mismatch makes the program exit with status 1.
//
// Build: nvcc -O3 -arch=sm_90a -std=c++17 -o gemv_bench gemv_bench.cu

#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "CUDA error: %s\n  at %s:%d: %s\n", cudaGetErrorString(e_),     \
              __FILE__, __LINE__, #call);                                              \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)

typedef __nv_bfloat16 bf16;

constexpr int kK = 8192;                                  // reduction dim (rows of W)
constexpr int kN = 8192;                                  // output dim (columns of W)
constexpr int kMmax = 64;
constexpr int kRowBytes = kN * 2;                         // 16 KiB per weight row
constexpr size_t kWBytes = size_t(kK) * kN * 2;           // 128 MiB
constexpr int kCopies = 3;   // W copies used round-robin so no run finds its data in L2
constexpr int kWarm = 3;
constexpr int kIters = 20;

// =====================================================================================
// Small device helpers
// =====================================================================================

// 16-byte global load, read-only path, no L1 allocation.  kHint adds the L2 256-byte
// prefetch-size hint (asks L2 to fetch the surrounding 256 B sector group from DRAM).
template <bool kHint>
__device__ __forceinline__ uint4 ld_stream16(const void* p) {
  uint4 r;
  if constexpr (kHint)
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst_smem, const void* src_gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst_smem), "l"(src_gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// D += A * B, m16n8k16, bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                                               uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t u4_word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;   // i is a compile-time constant
}

__device__ __forceinline__ float gelu_tanh(float v) {
  const float k0 = 0.7978845608028654f;   // sqrt(2/pi)
  const float k1 = 0.044715f;
  return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

__global__ void empty_kernel() {}

// =====================================================================================
// Part 1: pure read-bandwidth kernels
// =====================================================================================

// (a) Fully contiguous streaming.  Each CTA iteration covers blockDim*U consecutive 16-byte
// vectors (fully coalesced), the grid strides over the whole buffer.  U loads per thread are
// issued before any is consumed.
template <int U>
__global__ void __launch_bounds__(512, 1) read_contig(const uint4* __restrict__ p, size_t nvec,
                                                   unsigned* __restrict__ sink) {
  unsigned acc = 0;
  const size_t step = size_t(gridDim.x) * blockDim.x * U;
  size_t base = size_t(blockIdx.x) * blockDim.x * U + threadIdx.x;
  // Full tiles: U unguarded loads issued back to back, then consumed.
  for (; base + size_t(U - 1) * blockDim.x < nvec; base += step) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = ld_stream16<false>(p + base + size_t(u) * blockDim.x);
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  // Tail (last partial tile of this thread, if any).
  for (size_t i = base; i < nvec && i < base + size_t(U) * blockDim.x; i += blockDim.x) {
    const uint4 v = ld_stream16<false>(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  sink[size_t(blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}

// (a)/(b)/(c)/(d) Strip / panel reads.  The buffer is viewed as nrows rows of row_bytes.
// It is cut into nstrips column strips of (16 << vpr_log2) bytes and nslices row ranges
// (K-slices, uneven sizes allowed).  CTA b reads strip (b % nstrips) of slice
// (b / nstrips): for every row of its slice the contiguous strip bytes.  Threads of a CTA
// walk the region row-major with 16-byte loads, U loads in flight per thread.  With a strip
// as wide as the row, each CTA reads one contiguous panel of whole rows.
template <int U, bool kHint>
__global__ void __launch_bounds__(512, 1)
    read_strips(const uint8_t* __restrict__ buf, int row_bytes, int nrows, int vpr_log2,
                int nstrips, int nslices, unsigned* __restrict__ sink) {
  const int strip = blockIdx.x % nstrips;
  const int slice = blockIdx.x / nstrips;
  const int r0 = int((long long)slice * nrows / nslices);
  const int r1 = int((long long)(slice + 1) * nrows / nslices);
  const int nv = (r1 - r0) << vpr_log2;                 // 16-byte vectors in this region
  const int vmask = (1 << vpr_log2) - 1;
  const uint8_t* base = buf + size_t(r0) * row_bytes + (size_t(strip) << (vpr_log2 + 4));
  auto addr = [&](int vv) {
    return base + size_t(vv >> vpr_log2) * row_bytes + (size_t(vv & vmask) << 4);
  };
  unsigned acc = 0;
  int v0 = threadIdx.x;
  // Full tiles: U unguarded loads issued back to back, then consumed.
  for (; v0 + (U - 1) * int(blockDim.x) < nv; v0 += blockDim.x * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = ld_stream16<kHint>(addr(v0 + u * blockDim.x));
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  // Tail: remaining vectors of this thread (fewer than U).
  for (; v0 < nv; v0 += blockDim.x) {
    const uint4 v = ld_stream16<kHint>(addr(v0));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  sink[size_t(blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}

// =====================================================================================
// Part 2: split-K panel GEMV on tensor cores
// =====================================================================================
//
// Operand mapping (no shared-memory transpose needed).  For m16n8k16 (row.col) lane
// (g = lane/4, t = lane%4) holds B elements B[k][n] for n = g and k in {2t,2t+1,2t+8,2t+9}
// and A elements A[m][k] for m in {g, g+8} and the same k set.  The k order inside a
// 16-row chunk is irrelevant to the sum, so logical k {2t,2t+1} is mapped to actual rows
// {4t,4t+1} and logical k {2t+8,2t+9} to rows {4t+2,4t+3}.  A lane then needs, per chunk,
// the 4 consecutive rows 4t..4t+3 of W at the 8 columns 8g..8g+7 (four 16-byte loads) and
// x[m][4t..4t+3] (one 8-byte load per m row).  Element j of the lane's 8 columns feeds
// n-tile j, whose logical column n = g is actual column 8g + j.  Hence in the accumulator
// of n-tile j, c0/c1 (logical n = 2t, 2t+1) are actual columns 16t + j and 16t + 8 + j, so
// each lane ends up owning 16 consecutive output columns 16t..16t+15 of rows g and g+8.
// A warp "unit" = 16 K-rows x 64 columns = 2 KiB of W (each W row contributes 128 B).
//
// Streaming: each lane cp.async's exactly the four 16-byte pieces it will later consume
// into its own ring slot (ST slots per lane), so no barrier is needed -- each thread only
// waits on its own cp.async groups.  ST-1 units (2 KiB each) are in flight per warp.
// Reading the ring back is conflict-free (32 lanes x 16 B contiguous per piece).
//
// CTA = WC x WK warps.  The WC warps side by side cover CW = WC*CGW*64 columns, so one CTA
// reads CW*2 contiguous bytes of each weight row of its K-slice; each warp owns CGW groups
// of 64 columns.  WK > 1 splits the K-slice across warps (chunks interleaved) and reduces
// through shared memory; it is used only for the 64-column (128-byte strip) baseline.

enum CombineMode : int {
  kAtomicMemset = 0,
  kAtomicSelfClean = 1,
  kOrderedSlices = 2,
  kStreamOnly = 3,
};
static const char* kModeName[4] = {"atomic+memset", "atomic+selfclean", "ordered-slices",
                                   "stream-only"};

struct GemvParams {
  const bf16* x;       // [M][K]
  const bf16* W;       // [K][N]
  const float* bias;   // [N]
  bf16* y;             // [M][N]
  float* ws;           // [M][N] f32 workspace (atomic modes)
  float* part;         // [S][M][N] f32 per-slice partials (ordered-slices / stream-only)
  unsigned* ticket;    // [N/CW] arrival counters; 0 between launches
  int S;               // number of K-slices == gridDim.y
  int mode;            // CombineMode
};

template <int MROWS>
__device__ __forceinline__ void emit_partial(const GemvParams& p, int slice, int m, int col,
                                             float4 v) {
  if (p.mode == kAtomicMemset || p.mode == kAtomicSelfClean) {
    atomicAdd(reinterpret_cast<float4*>(p.ws + size_t(m) * kN + col), v);   // red.v4.f32
  } else {
    __stcg(reinterpret_cast<float4*>(p.part + (size_t(slice) * MROWS + m) * kN + col), v);
  }
}

// One unit: 16 K-rows x 64 columns for MT m-tiles (8 n-tiles x MT m-tiles of mma).
template <int MT>
__device__ __forceinline__ void mma_unit(float (&acc)[MT][8][4], const uint32_t (&a)[MT][4],
                                         const uint4 (&R)[4]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    // b0 = {W[4t][col j], W[4t+1][col j]}, b1 = {W[4t+2][col j], W[4t+3][col j]}
    const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
    const uint32_t b0 = __byte_perm(u4_word(R[0], j >> 1), u4_word(R[1], j >> 1), sel);
    const uint32_t b1 = __byte_perm(u4_word(R[2], j >> 1), u4_word(R[3], j >> 1), sel);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) mma_bf16_16816(acc[mt][j], a[mt], b0, b1);
  }
}

template <int MROWS, int CGW, int WC, int WK, int ST>
__global__ void __launch_bounds__(WC * WK * 32, 1) gemv_panel(GemvParams p) {
  constexpr int MT = (MROWS + 15) / 16;
  constexpr int CW = WC * CGW * 64;                 // columns per CTA
  constexpr int NTHR = WC * WK * 32;
  constexpr int kSlotBytes = 4 * 32 * 16;           // one unit for a whole warp (2 KiB)
  constexpr int kChunks = kK / 16;
  constexpr size_t kChunkStride = size_t(WK) * 16 * kN;   // elements between a warp's chunks
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ unsigned s_is_last;

  const int cb = blockIdx.x;      // column block
  const int slice = blockIdx.y;   // K-slice
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wc = warp % WC, wk = warp / WC;
  const int g = lane >> 2, t = lane & 3;

  // K-slice as a range of 16-row chunks (uneven split allowed); warp wk takes every WK-th.
  const int c0 = int((long long)slice * kChunks / p.S);
  const int c1 = int((long long)(slice + 1) * kChunks / p.S);
  const int nch = (c1 - c0 - wk + WK - 1) / WK;     // >= 0
  const int nunits = nch * CGW;

  const int col_warp = cb * CW + wc * (CGW * 64);
  const bf16* wlane = p.W + size_t(c0 + wk) * 16 * kN + size_t(4 * t) * kN + col_warp + 8 * g;
  unsigned char* ring = smem + warp * (ST * kSlotBytes) + lane * 16;  // + slot*2048 + r*512
  const uint32_t ring_s = smem_u32(ring);

  // Unit u = (chunk u / CGW, column group u % CGW); lane copies rows 4t..4t+3, cols 8g..8g+7.
  auto issue = [&](int u) {
    const int i = u / CGW, cg = u % CGW;
    const bf16* src = wlane + size_t(i) * kChunkStride + cg * 64;
    const uint32_t dst = ring_s + (u % ST) * kSlotBytes;
#pragma unroll
    for (int r = 0; r < 4; ++r) cp_async16(dst + r * 512, src + size_t(r) * kN);
  };

  float acc[CGW][MT][8][4];
#pragma unroll
  for (int cg = 0; cg < CGW; ++cg)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[cg][mt][j][e] = 0.f;

  // Prologue: ST-1 units in flight (one commit group per unit; empty groups keep counts even).
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nunits) issue(s);
    cp_async_commit();
  }

  for (int i = 0; i < nch; ++i) {
    // A fragments for this chunk: x[m][k0+4t .. k0+4t+3] as {a0|a2} (row g), {a1|a3} (row g+8).
    const int krow = (c0 + wk + i * WK) * 16 + 4 * t;
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int m0 = mt * 16 + g, m1 = m0 + 8;
      uint2 lo = make_uint2(0u, 0u), hi = make_uint2(0u, 0u);
      if (m0 < MROWS) lo = __ldg(reinterpret_cast<const uint2*>(p.x + size_t(m0) * kK + krow));
      if (m1 < MROWS) hi = __ldg(reinterpret_cast<const uint2*>(p.x + size_t(m1) * kK + krow));
      a[mt][0] = lo.x; a[mt][1] = hi.x; a[mt][2] = lo.y; a[mt][3] = hi.y;
    }
#pragma unroll
    for (int cg = 0; cg < CGW; ++cg) {
      const int u = i * CGW + cg;
      // Refill the slot consumed by unit u-1, then wait until unit u has landed.
      if (u + ST - 1 < nunits) issue(u + ST - 1);
      cp_async_commit();
      cp_async_wait<ST - 1>();
      const unsigned char* slot = ring + (u % ST) * kSlotBytes;
      uint4 R[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) R[r] = *reinterpret_cast<const uint4*>(slot + r * 512);
      mma_unit<MT>(acc[cg], a, R);
    }
  }
  cp_async_wait<0>();

  // ---- this CTA's partial sums -> workspace / partial buffer ----
  float* red = reinterpret_cast<float*>(smem);   // [WK][MROWS][CW], aliases the rings
  if constexpr (WK > 1) __syncthreads();         // every warp is done with its ring
#pragma unroll
  for (int cg = 0; cg < CGW; ++cg)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = mt * 16 + g + 8 * h;
        if (m >= MROWS) continue;
        const int col = col_warp + cg * 64 + 16 * t;
        const float(&A)[8][4] = acc[cg][mt];
        float4 v[4];
        v[0] = make_float4(A[0][2 * h], A[1][2 * h], A[2][2 * h], A[3][2 * h]);
        v[1] = make_float4(A[4][2 * h], A[5][2 * h], A[6][2 * h], A[7][2 * h]);
        v[2] = make_float4(A[0][2 * h + 1], A[1][2 * h + 1], A[2][2 * h + 1], A[3][2 * h + 1]);
        v[3] = make_float4(A[4][2 * h + 1], A[5][2 * h + 1], A[6][2 * h + 1], A[7][2 * h + 1]);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if constexpr (WK == 1) {
            emit_partial<MROWS>(p, slice, m, col + 4 * q, v[q]);
          } else {
            *reinterpret_cast<float4*>(red + (size_t(wk) * MROWS + m) * CW + (col - cb * CW) +
                                       4 * q) = v[q];
          }
        }
      }
  if constexpr (WK > 1) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < MROWS * CW / 4; idx += NTHR) {
      const int m = idx / (CW / 4), c = (idx % (CW / 4)) * 4;
      float4 s = *reinterpret_cast<const float4*>(red + size_t(m) * CW + c);
      for (int w = 1; w < WK; ++w) {   // fixed order
        const float4 o = *reinterpret_cast<const float4*>(red + (size_t(w) * MROWS + m) * CW + c);
        s.x += o.x; s.y += o.y; s.z += o.z; s.w += o.w;
      }
      emit_partial<MROWS>(p, slice, m, cb * CW + c, s);
    }
  }
  if (p.mode == kStreamOnly) return;

  // ---- cross-CTA combine: the last CTA of this column block finishes it ----
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned prev = atomicAdd(p.ticket + cb, 1u);
    const bool last = prev == unsigned(p.S - 1);
    if (last) atomicExch(p.ticket + cb, 0u);   // all S arrivals seen: ready for next launch
    s_is_last = last ? 1u : 0u;
  }
  __syncthreads();
  if (!s_is_last) return;
  __threadfence();

  for (int idx = threadIdx.x; idx < MROWS * CW / 4; idx += NTHR) {
    const int m = idx / (CW / 4);
    const int col = cb * CW + (idx % (CW / 4)) * 4;
    float4 s;
    if (p.mode == kOrderedSlices) {
      s = __ldcg(reinterpret_cast<const float4*>(p.part + size_t(m) * kN + col));
      for (int sl = 1; sl < p.S; ++sl) {   // slices in order: deterministic
        const float4 o =
            __ldcg(reinterpret_cast<const float4*>(p.part + (size_t(sl) * MROWS + m) * kN + col));
        s.x += o.x; s.y += o.y; s.z += o.z; s.w += o.w;
      }
    } else {
      float4* wsp = reinterpret_cast<float4*>(p.ws + size_t(m) * kN + col);
      s = __ldcg(wsp);
      if (p.mode == kAtomicSelfClean) __stcg(wsp, make_float4(0.f, 0.f, 0.f, 0.f));
    }
    const float4 b = __ldg(reinterpret_cast<const float4*>(p.bias + col));
    const __nv_bfloat162 lo = __floats2bfloat162_rn(gelu_tanh(s.x + b.x), gelu_tanh(s.y + b.y));
    const __nv_bfloat162 hi = __floats2bfloat162_rn(gelu_tanh(s.z + b.z), gelu_tanh(s.w + b.w));
    uint2 o;
    o.x = *reinterpret_cast<const uint32_t*>(&lo);
    o.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(p.y + size_t(m) * kN + col) = o;
  }
}

// Simple reference: one thread per output, f32 accumulation in natural k order.
__global__ void ref_gemm(const bf16* __restrict__ x, const bf16* __restrict__ W,
                         float* __restrict__ out, int M) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y;
  if (n >= kN || m >= M) return;
  float acc = 0.f;
  for (int k = 0; k < kK; ++k)
    acc = fmaf(__bfloat162float(x[size_t(m) * kK + k]), __bfloat162float(W[size_t(k) * kN + n]),
               acc);
  out[size_t(m) * kN + n] = acc;
}

// =====================================================================================
// Host side
// =====================================================================================

static uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform_pm1(uint64_t seed, uint64_t i) {   // uniform in [-1, 1)
  return double(splitmix64(seed * 0x632BE59BD9B4E019ull + i) >> 11) * (2.0 / 9007199254740992.0) -
         1.0;
}
static uint16_t f2bf(float f) {   // round to nearest even (inputs are finite)
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
static float bf2f(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static double gelu_ref(double v) {
  return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}
static bool within_tol(double got, double ref) {   // bf16 output rounding is <= 2^-9 relative
  const double err = std::fabs(got - ref);
  return err <= 1e-2 * std::fabs(ref) + 1e-3;     // false for NaN
}

struct Sample {
  int m, n;
  double ref;   // gelu(x.W + bias) in f64
};

struct Ctx {
  int nsm = 0;
  bf16* W[kCopies] = {};
  bf16* x = nullptr;
  float* bias = nullptr;
  bf16* y = nullptr;
  float* ws = nullptr;
  float* part = nullptr;
  size_t part_floats = 0;
  unsigned* ticket = nullptr;
  unsigned* sink = nullptr;
  std::vector<float> refy;                  // [64][N] gelu(GPU ref + bias), f32
  std::vector<Sample> samples[3];           // for M = 1, 16, 64
  bool any_fail = false;
};

struct Timing {
  double best_us, med_us;
};
static cudaEvent_t g_ev[2 * kIters];

// Runs op(iteration) kWarm times, then kIters times each bracketed by its own event pair
// (all enqueued back to back, one sync at the end).  Reports best and median.
template <class F>
static Timing time_op(F&& op) {
  for (int i = 0; i < kWarm; ++i) op(i);
  for (int i = 0; i < kIters; ++i) {
    CK(cudaEventRecord(g_ev[2 * i]));
    op(kWarm + i);
    CK(cudaEventRecord(g_ev[2 * i + 1]));
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> ms(kIters);
  for (int i = 0; i < kIters; ++i) CK(cudaEventElapsedTime(&ms[i], g_ev[2 * i], g_ev[2 * i + 1]));
  std::sort(ms.begin(), ms.end());
  return {ms[0] * 1e3, ms[kIters / 2] * 1e3};
}

static double gbps(double us) { return double(kWBytes) / us / 1e3; }

struct Result {
  std::string sect, name, cfg;
  double gb_best;
  bool ok;
  int M;
  int mode;
};
static std::vector<Result> g_results;

static void print_header() {
  printf("%-5s %-24s %-60s %6s %8s %8s %7s %7s  %s\n", "sect", "pattern/kernel", "config",
         "CTAs", "best_us", "med_us", "GB/s", "GB/s_md", "check");
}
static void print_row(const char* sect, const std::string& name, const std::string& cfg,
                      int ctas, Timing t, const std::string& check) {
  printf("%-5s %-24s %-60s %6d %8.2f %8.2f %7.0f %7.0f  %s\n", sect, name.c_str(), cfg.c_str(),
         ctas, t.best_us, t.med_us, gbps(t.best_us), gbps(t.med_us), check.c_str());
  fflush(stdout);
}

// ------------------------------- Part 1 drivers ---------------------------------------

static void bench_contig(Ctx& c, const char* sect, int ctas, int thr) {
  const size_t nvec = kWBytes / 16;
  Timing t = time_op([&](int it) {
    read_contig<8><<<ctas, thr>>>(reinterpret_cast<const uint4*>(c.W[it % kCopies]), nvec,
                                  c.sink);
  });
  char cfg[96];
  snprintf(cfg, sizeof cfg, "grid-stride thr=%d U=8 (%d KiB/CTA-step)", thr, thr * 8 * 16 / 1024);
  print_row(sect, "contiguous", cfg, ctas, t, "-");
  g_results.push_back({sect, "contiguous", cfg, gbps(t.best_us), true, 0, -1});
}

// strip_bytes: contiguous bytes per row per CTA; nslices: K-slices (CTAs = nstrips*nslices).
template <int U, bool kHint>
static void bench_strips(Ctx& c, const char* sect, int strip_bytes, int nslices, int thr) {
  const int nstrips = kRowBytes / strip_bytes;
  const int vpr = strip_bytes / 16;
  int vpr_log2 = 0;
  while ((1 << vpr_log2) < vpr) ++vpr_log2;
  const int ctas = nstrips * nslices;
  Timing t = time_op([&](int it) {
    read_strips<U, kHint><<<ctas, thr>>>(reinterpret_cast<const uint8_t*>(c.W[it % kCopies]),
                                         kRowBytes, kK, vpr_log2, nstrips, nslices, c.sink);
  });
  char name[64], cfg[96];
  if (strip_bytes == kRowBytes)
    snprintf(name, sizeof name, "row panels");
  else
    snprintf(name, sizeof name, "strip %dB", strip_bytes);
  snprintf(cfg, sizeof cfg, "%dx%d (strips x kslices) rows/CTA=%d thr=%d U=%d%s", nstrips,
           nslices, kK / nslices, thr, U, kHint ? " L2::256B" : "");
  print_row(sect, name, cfg, ctas, t, "-");
  g_results.push_back({sect, name, cfg, gbps(t.best_us), true, 0, -1});
}

// ------------------------------- Part 2 drivers ---------------------------------------

static int sample_set_index(int M) { return M == 1 ? 0 : (M == 16 ? 1 : 2); }

// Copies y back and compares: all M*N outputs vs the GPU reference, sampled outputs vs f64.
static std::string check_output(Ctx& c, int M, bool& ok) {
  std::vector<uint16_t> hy(size_t(M) * kN);
  CK(cudaMemcpy(hy.data(), c.y, hy.size() * 2, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  double max_full = 0;
  for (size_t i = 0; i < hy.size(); ++i) {
    const double got = bf2f(hy[i]), ref = c.refy[i];
    if (!within_tol(got, ref)) ++bad;
    const double e = std::fabs(got - ref);
    if (!(e <= max_full)) max_full = e;   // also propagates NaN
  }
  size_t sbad = 0;
  double max_s = 0;
  for (const Sample& s : c.samples[sample_set_index(M)]) {
    const double got = bf2f(hy[size_t(s.m) * kN + s.n]);
    if (!within_tol(got, s.ref)) ++sbad;
    const double e = std::fabs(got - s.ref);
    if (!(e <= max_s)) max_s = e;
  }
  ok = bad == 0 && sbad == 0;
  char buf[160];
  if (ok)
    snprintf(buf, sizeof buf, "ok f64err=%.1e", max_s);
  else
    snprintf(buf, sizeof buf, "FAIL bad=%zu/%zu samples_bad=%zu f64err=%.1e fullerr=%.1e", bad,
             hy.size(), sbad, max_s, max_full);
  return buf;
}

template <int MROWS, int CGW, int WC, int WK, int ST>
static void bench_gemv(Ctx& c, bool baseline) {
  auto kern = gemv_panel<MROWS, CGW, WC, WK, ST>;
  constexpr int CW = WC * CGW * 64, NTHR = WC * WK * 32;
  const size_t ring = size_t(WC * WK) * ST * 2048;
  const size_t redb = WK > 1 ? size_t(WK) * MROWS * CW * 4 : 0;
  const size_t smem = std::max(ring, redb);
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kern));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, NTHR, smem));
  char name[64];
  snprintf(name, sizeof name, "gemv M=%d %s", MROWS, baseline ? "strip128" : "panel");
  if (occ < 1) {
    printf("%-5s %-24s CW=%d does not fit on an SM (smem %zu B, %d regs)\n", "gemv", name, CW,
           smem, fa.numRegs);
    c.any_fail = true;
    return;
  }
  const int ncb = kN / CW;
  std::vector<int> slist;
  if (baseline) {
    slist = {1, 4};   // current scheme (128 CTAs), and the same strips split 4x over K
  } else {
    slist.push_back(std::max(1, c.nsm / ncb));          // about one CTA per SM
    const int s_full = std::max(1, occ * c.nsm / ncb);  // one full wave at max occupancy
    if (s_full != slist[0]) slist.push_back(s_full);
    slist.push_back(4 * s_full);                          // four waves (finer load balance)
  }
  for (int S : slist) {
    const int ctas = ncb * S;
    const int nparts = S * MROWS * kN;
    if (size_t(nparts) > c.part_floats) {
      fprintf(stderr, "partial buffer too small\n");
      exit(2);
    }
    for (int mode = 0; mode < 4; ++mode) {
      // Clean state: y = NaN (0xFFFF), workspace and tickets zeroed (untimed).
      CK(cudaMemset(c.y, 0xFF, size_t(kMmax) * kN * 2));
      CK(cudaMemset(c.ws, 0, size_t(kMmax) * kN * 4));
      CK(cudaMemset(c.ticket, 0, 4096 * sizeof(unsigned)));
      GemvParams prm;
      prm.x = c.x;
      prm.bias = c.bias;
      prm.y = c.y;
      prm.ws = c.ws;
      prm.part = c.part;
      prm.ticket = c.ticket;
      prm.S = S;
      prm.mode = mode;
      Timing t = time_op([&](int it) {
        prm.W = c.W[it % kCopies];
        if (mode == kAtomicMemset) CK(cudaMemsetAsync(c.ws, 0, size_t(MROWS) * kN * 4));
        kern<<<dim3(ncb, S), NTHR, smem>>>(prm);
      });
      std::string check = "n/a (no combine)";
      bool ok = true;
      if (mode != kStreamOnly) {
        check = check_output(c, MROWS, ok);
        if (!ok) c.any_fail = true;
      }
      char cfg[128];
      snprintf(cfg, sizeof cfg, "%-16s CW=%d(%dB/row) S=%d st=%d r=%d occ=%d%s", kModeName[mode],
               CW, CW * 2, S, ST, fa.numRegs, occ, fa.localSizeBytes ? " LOCALMEM" : "");
      print_row("gemv", name, cfg, ctas, t, check);
      g_results.push_back({"gemv", name, cfg, gbps(t.best_us), ok, MROWS, mode});
    }
  }
}

// ------------------------------- setup / main -------------------------------------------

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s  sm_%d%d  SMs=%d  L2=%d MiB  mem=%.1f GiB\n", prop.name, prop.major,
         prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20,
         double(prop.totalGlobalMem) / (1ull << 30));
  if (prop.major != 9) {
    fprintf(stderr, "this benchmark targets sm_90 (H100/H200)\n");
    return 2;
  }
  Ctx c;
  c.nsm = prop.multiProcessorCount;
  for (int i = 0; i < 2 * kIters; ++i) CK(cudaEventCreate(&g_ev[i]));

  // ---------------- data: x, W uniform in [-1,1] (W scaled by 3/sqrt(K)), bias in [-.5,.5]
  std::vector<uint16_t> hx(size_t(kMmax) * kK), hW(size_t(kK) * kN);
  std::vector<float> hbias(kN);
  const double wscale = 3.0 / std::sqrt(double(kK));   // pre-activation std ~ 1
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = f2bf(float(uniform_pm1(1, i)));
  for (size_t i = 0; i < hW.size(); ++i) hW[i] = f2bf(float(uniform_pm1(2, i) * wscale));
  for (int i = 0; i < kN; ++i) hbias[i] = float(0.5 * uniform_pm1(3, i));

  for (int i = 0; i < kCopies; ++i) CK(cudaMalloc(&c.W[i], kWBytes));
  CK(cudaMemcpy(c.W[0], hW.data(), kWBytes, cudaMemcpyHostToDevice));
  for (int i = 1; i < kCopies; ++i)
    CK(cudaMemcpy(c.W[i], c.W[0], kWBytes, cudaMemcpyDeviceToDevice));
  CK(cudaMalloc(&c.x, hx.size() * 2));
  CK(cudaMemcpy(c.x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&c.bias, kN * 4));
  CK(cudaMemcpy(c.bias, hbias.data(), kN * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&c.y, size_t(kMmax) * kN * 2));
  CK(cudaMalloc(&c.ws, size_t(kMmax) * kN * 4));
  c.part_floats = size_t(160) * kMmax * kN;   // up to 160 K-slices at M = 64 (320 MiB)
  CK(cudaMalloc(&c.part, c.part_floats * 4));
  CK(cudaMalloc(&c.ticket, 4096 * sizeof(unsigned)));
  CK(cudaMemset(c.ticket, 0, 4096 * sizeof(unsigned)));
  CK(cudaMalloc(&c.sink, size_t(4) << 20 << 2));   // 4M per-thread sink words

  // ---------------- references
  // Host f64 reference on sampled outputs (256 per M, m cycles over all rows, n spread).
  const int Ms[3] = {1, 16, 64};
  for (int si = 0; si < 3; ++si) {
    const int M = Ms[si];
    for (int i = 0; i < 256; ++i) {
      Sample s;
      s.m = i % M;
      s.n = i == 0 ? 0 : (i == 1 ? kN - 1 : int(splitmix64(1000 + si * 7919 + i) % kN));
      double acc = 0;
      for (int k = 0; k < kK; ++k)
        acc += double(bf2f(hx[size_t(s.m) * kK + k])) * double(bf2f(hW[size_t(k) * kN + s.n]));
      s.ref = gelu_ref(acc + double(hbias[s.n]));
      c.samples[si].push_back(s);
    }
  }
  // GPU reference for all 64 x N pre-activations, validated against the f64 samples.
  {
    float* dref = nullptr;
    CK(cudaMalloc(&dref, size_t(kMmax) * kN * 4));
    ref_gemm<<<dim3(kN / 256, kMmax), 256>>>(c.x, c.W[0], dref, kMmax);
    CK(cudaGetLastError());
    std::vector<float> href(size_t(kMmax) * kN);
    CK(cudaMemcpy(href.data(), dref, href.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaFree(dref));
    c.refy.resize(href.size());
    for (size_t i = 0; i < href.size(); ++i)
      c.refy[i] = float(gelu_ref(double(href[i]) + double(hbias[i % kN])));
    double maxe = 0;
    for (int si = 0; si < 3; ++si)
      for (const Sample& s : c.samples[si]) {
        const double e = std::fabs(double(c.refy[size_t(s.m) * kN + s.n]) - s.ref);
        if (!(e <= maxe)) maxe = e;
      }
    printf("GPU reference vs host f64 (768 samples): max abs err %.2e\n", maxe);
    if (!(maxe <= 1e-3)) {
      fprintf(stderr, "CHECK FAILED: GPU reference disagrees with host f64 reference\n");
      return 1;
    }
  }

  print_header();
  // ---------------- timing floor
  {
    Timing t = time_op([&](int) { empty_kernel<<<1, 32>>>(); });
    printf("%-5s %-24s %-60s %6d %8.2f %8.2f %7s %7s  %s\n", "info", "empty kernel",
           "event-to-event floor", 1, t.best_us, t.med_us, "-", "-", "-");
    Timing tm = time_op([&](int) { CK(cudaMemsetAsync(c.ws, 0, size_t(kMmax) * kN * 4)); });
    printf("%-5s %-24s %-60s %6s %8.2f %8.2f %7s %7s  %s\n", "info", "memset 2 MiB",
           "cudaMemsetAsync alone (M=64 workspace)", "-", tm.best_us, tm.med_us, "-", "-", "-");
  }

  // ---------------- Part 1: read patterns
  // (a) contiguous
  bench_contig(c, "a", 4 * c.nsm, 256);
  bench_contig(c, "a", 8 * c.nsm, 256);
  bench_strips<8, false>(c, "a", kRowBytes, c.nsm, 256);       // contiguous ~1 MiB panels
  bench_strips<8, false>(c, "a", kRowBytes, 4 * c.nsm, 256);   // contiguous ~250 KiB panels
  // (b) current scheme: 128 CTAs x 128-byte strips of every row, plus in-flight/hint controls
  bench_strips<8, false>(c, "b", 128, 1, 256);
  bench_strips<16, false>(c, "b", 128, 1, 256);
  bench_strips<8, false>(c, "b", 128, 1, 512);
  bench_strips<8, true>(c, "b", 128, 1, 256);
  // (c) wider strips, split over K so that there are 128 CTAs
  for (int sb = 256; sb <= 4096; sb *= 2) bench_strips<8, false>(c, "c", sb, 128 / (kRowBytes / sb), 256);
  bench_strips<8, true>(c, "c", 1024, 8, 256);
  // (d) same strips with ~4 and ~8 CTAs per SM
  for (int ctas : {512, 1024})
    for (int sb = 128; sb <= 4096; sb *= 2)
      bench_strips<8, false>(c, "d", sb, ctas / (kRowBytes / sb), 256);

  // ---------------- Part 2: GEMV (+ check)
  // template args: <M, column groups per warp, warps across columns, warps across K, ring>
  bench_gemv<1, 1, 1, 8, 8>(c, true);    // 64 cols = 128 B strips (current scheme)
  bench_gemv<1, 1, 4, 1, 8>(c, false);   // 256 cols  = 512 B per row
  bench_gemv<1, 1, 8, 1, 6>(c, false);   // 512 cols  = 1 KiB per row
  bench_gemv<1, 2, 8, 1, 6>(c, false);   // 1024 cols = 2 KiB per row
  bench_gemv<1, 4, 8, 1, 8>(c, false);   // 2048 cols = 4 KiB per row
  bench_gemv<16, 1, 1, 8, 8>(c, true);
  bench_gemv<16, 1, 4, 1, 8>(c, false);
  bench_gemv<16, 1, 8, 1, 6>(c, false);
  bench_gemv<16, 2, 8, 1, 6>(c, false);
  bench_gemv<16, 4, 8, 1, 8>(c, false);
  bench_gemv<64, 1, 1, 8, 8>(c, true);
  bench_gemv<64, 1, 4, 1, 8>(c, false);
  bench_gemv<64, 1, 8, 1, 8>(c, false);
  // (M = 64 with >= 1024 columns per CTA would need 256 f32 accumulators per thread.)

  // ---------------- summary
  printf("\nsummary (best-of-%d weight GB/s):\n", kIters);
  auto best_of = [&](auto pred) {
    const Result* b = nullptr;
    for (const Result& r : g_results)
      if (pred(r) && (!b || r.gb_best > b->gb_best)) b = &r;
    return b;
  };
  for (const char* s : {"a", "b", "c", "d"}) {
    const Result* b = best_of([&](const Result& r) { return r.sect == s; });
    if (b) printf("  reads (%s) best: %7.0f  %s %s\n", s, b->gb_best, b->name.c_str(), b->cfg.c_str());
  }
  for (int M : {1, 16, 64})
    for (int mode = 0; mode < 4; ++mode) {
      const Result* b = best_of([&](const Result& r) {
        return r.sect == "gemv" && r.M == M && r.mode == mode && r.ok;
      });
      if (b) printf("  gemv M=%-2d %-16s best: %7.0f  %s | %s\n", M, kModeName[mode], b->gb_best,
                    b->name.c_str(), b->cfg.c_str() + 17);
    }
  if (c.any_fail) {
    fprintf(stderr, "CHECK FAILED: at least one GEMV result is wrong (see FAIL rows)\n");
    return 1;
  }
  printf("all GEMV checks passed\n");
  return 0;
}
