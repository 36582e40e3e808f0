constexpr long long R = 32768, N = 4096;
__device__ __forceinline__ uint4 ld_plain(const void* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ uint4 ld_na(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ld_cs(const void* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
template <int L> __device__ __forceinline__ uint4 ld(const void* p) {
  if constexpr (L == 0) return ld_plain(p);
  else if constexpr (L == 1) return ld_na(p);
  else return ld_cs(p);
}
template <typename T> struct Elem;
template <> struct Elem<unsigned short> {
  static constexpr int V = 8;
  __device__ static float get(const uint4& v, int e) {
    unsigned w = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
    return __uint_as_float((e & 1) ? (w & 0xffff0000u) : (w << 16));
  }
  __device__ static unsigned short put(float f) { unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
};
template <> struct Elem<float> {
  static constexpr int V = 4;
  __device__ static float get(const uint4& v, int e) { return __uint_as_float(e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w); }
  __device__ static float put(float f) { return f; }
};

// Block: 32 x SPLIT threads; lane tx owns P vectors of a row, 32 x V columns
// apart; warp ty takes rows lo + ty, + SPLIT, ... of the block's slice, U at once.
template <typename T, int P, int U, int L, int SPLIT>
__global__ void __launch_bounds__(32 * SPLIT) cs(const T* __restrict__ in, T* __restrict__ out, float* __restrict__ ws,
                                                 unsigned* __restrict__ cnt) {
  constexpr int V = Elem<T>::V;
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  const long long o = (long long)blockIdx.x * 32 * P * V + tx * V;
  float acc[P][V];
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int e = 0; e < V; ++e) acc[p][e] = 0.f;
  const long long chunk = (R + gridDim.y - 1) / gridDim.y;
  const long long lo = blockIdx.y * chunk, hi = min(R, lo + chunk);
  long long r = lo + ty;
  for (; r + (U - 1) * SPLIT < hi; r += U * SPLIT) {
    uint4 v[U][P];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int p = 0; p < P; ++p) v[u][p] = ld<L>(in + (r + u * SPLIT) * N + o + p * 32 * V);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int e = 0; e < V; ++e) acc[p][e] += Elem<T>::get(v[u][p], e);
  }
  for (; r < hi; r += SPLIT) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      uint4 v = ld<L>(in + r * N + o + p * 32 * V);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[p][e] += Elem<T>::get(v, e);
    }
  }
  __shared__ float part[SPLIT][32 * P * V];
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int e = 0; e < V; ++e) part[ty][p * 32 * V + tx * V + e] = acc[p][e];
  __syncthreads();
  // Each of the block's threads sums one column's SPLIT partials.
  const int cols = 32 * P * V;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float s = 0.f;
    for (int y = 0; y < SPLIT; ++y) s += part[y][c];
    const int p = c / (32 * V), w = c % (32 * V);
    ws[blockIdx.y * N + blockIdx.x * cols + p * 32 * V + w] = s;
  }
  __threadfence();
  __syncthreads();
  __shared__ int last;
  if (threadIdx.x == 0) last = atomicAdd(cnt + blockIdx.x, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float s = 0.f;
    for (int y = 0; y < (int)gridDim.y; ++y) s += __ldcg(ws + y * N + blockIdx.x * cols + c);
    out[blockIdx.x * cols + c] = Elem<T>::put(s);
  }
}

__global__ void fill0(int4* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) p[i] = make_int4(0, 0, 0, 0);
}
__global__ void readall(const int4* p, long long n, int* sink) {
  int s = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    int4 v = __ldcg(p + i);
    s ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (s == 0x7fffffff) *sink = s;
}
template __global__ void cs<unsigned short,1,8,0,8>(const unsigned short*, unsigned short*, float*, unsigned*);
