// Column sums of [R, N] (R = 32768, N = 4096), bf16 and f32, as kfuse's
// reduce/3 generates them (gen_*.cuh) and in forms that keep more loads in
// flight (U rows a thread at once), read wider strips (P vectors a lane), or
// load through the L1-bypassing streaming form; beside a bare read and a
// device copy of the same bytes. Each timed after an L2 flush by reads and
// after a 256 MB fill of zeros (what do_bench's cache.zero_() leaves).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <string>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

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
template <int L>
__global__ void bare(const uint4* p, long long n, int* sink) {  // 8 loads a thread in flight
  int s = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = ld<L>(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < 8; ++u) s ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) { uint4 v = ld<L>(p + i); s ^= v.x ^ v.w; }
  if (s == 0x7fffffff) *sink = s;
}


// A generated kernel as NVRTC compiled it (the service's options), launched
// through the driver API: (in, out, ws, cnt).
struct Gen {
  CUfunction f; unsigned gx, gy;
  Gen(const char* cubin, const char* entry, unsigned x, unsigned y) : gx(x), gy(y) {
    CUmodule m;
    if (cuModuleLoad(&m, cubin) != CUDA_SUCCESS || cuModuleGetFunction(&f, m, entry) != CUDA_SUCCESS) {
      printf("cannot load %s %s\n", cubin, entry); exit(1);
    }
  }
  void operator()(void* in, void* out, float* ws, unsigned* cnt) const {
    void* args[] = {&in, &out, &ws, &cnt};
    if (cuLaunchKernel(f, gx, gy, 1, 256, 1, 1, 0, 0, args, nullptr) != CUDA_SUCCESS) { printf("launch failed\n"); exit(1); }
  }
};

struct Ctx {
  int4* flush; long long flushN; int* sink; unsigned* cnt;
  cudaEvent_t a, b;
};

template <typename F>
void timeit(Ctx& c, const char* name, const char* ty, double bytes, F&& fn, const char* check) {
  for (int mode = 0; mode < 2; ++mode) {
    std::vector<float> t;
    for (int i = 0; i < 40; ++i) {
      if (mode == 0) readall<<<1056, 256>>>(c.flush, c.flushN, c.sink);
      else fill0<<<1056, 256>>>(c.flush, c.flushN);
      CK(cudaMemsetAsync(c.cnt, 0, 4096 * 4));
      CK(cudaEventRecord(c.a));
      fn();
      CK(cudaEventRecord(c.b));
      CK(cudaEventSynchronize(c.b));
      float ms; CK(cudaEventElapsedTime(&ms, c.a, c.b));
      if (i >= 5) t.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    printf("%-4s %-28s %-7s median %8.2f us best %8.2f  %6.0f GB/s  %s\n", ty, name, mode ? "memset" : "reads", t[t.size() / 2], t[0],
           bytes / (t[t.size() / 2] * 1e3), check);
    fflush(stdout);
  }
}

static float bf2f(unsigned short h) { unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }

template <typename T>
struct Case {
  T* in; T* out; float* ws; std::vector<double> ref; std::vector<T> host;
  const char* ty;
};

template <typename T>
std::string check(Case<T>& k) {
  std::vector<T> o(N);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(o.data(), k.out, N * sizeof(T), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int j = 0; j < N; ++j) {
    double v = std::is_same<T, float>::value ? (double)((float*)o.data())[j] : (double)bf2f(((unsigned short*)o.data())[j]);
    worst = std::max(worst, std::fabs(v - k.ref[j]));
  }
  char buf[128]; snprintf(buf, sizeof buf, "max err %.4g vs fp64", worst);
  CK(cudaMemset(k.out, 0xff, N * sizeof(T)));
  return buf;
}

template <typename T, int P, int U, int L, int SPLIT>
void run(Ctx& c, Case<T>& k, int slices) {
  constexpr int V = Elem<T>::V;
  dim3 grid(N / (32 * P * V), slices);
  auto fn = [&] { cs<T, P, U, L, SPLIT><<<grid, 32 * SPLIT>>>(k.in, k.out, k.ws, c.cnt); };
  CK(cudaMemset(c.cnt, 0, 4096 * 4));
  fn();
  std::string ck = check(k);
  char name[96]; snprintf(name, sizeof name, "P%d U%d L%d split%d slices%d", P, U, L, SPLIT, slices);
  timeit(c, name, k.ty, (double)R * N * sizeof(T), fn, ck.c_str());
}

// The generated kernels of entries.txt for this dtype, one a line:
// "<bf16|f32> <cubin> <entry> <grid x> <grid y> <label>", each checked,
// timed, then timed again after `between` (the hand-written kernels).
template <typename T, typename F>
void generated(Ctx& c, Case<T>& k, double bytes, F&& between) {
  struct Timed { Gen gen; std::string label, check; };
  std::vector<Timed> kernels;
  FILE* list = fopen("entries.txt", "r");
  if (!list) { printf("no entries.txt\n"); exit(1); }
  char ty[8], cubin[128], entry[128], label[128];
  unsigned gx, gy;
  while (fscanf(list, "%7s %127s %127s %u %u %127[^\n]", ty, cubin, entry, &gx, &gy, label) == 6) {
    if (strcmp(ty, k.ty) != 0) continue;
    Timed t{Gen(cubin, entry, gx, gy), label, ""};
    CK(cudaMemset(c.cnt, 0, 4096 * 4));
    t.gen(k.in, k.out, k.ws, c.cnt);
    t.check = check(k);
    kernels.push_back(t);
  }
  fclose(list);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) between();
    for (const Timed& t : kernels) {
      const std::string name = pass ? t.label + " again" : t.label;
      timeit(c, name.c_str(), k.ty, bytes, [&] { t.gen(k.in, k.out, k.ws, c.cnt); }, t.check.c_str());
    }
  }
}

int main() {
  Ctx c;
  c.flushN = (256ll << 20) / 16;
  CK(cudaMalloc(&c.flush, c.flushN * 16));
  CK(cudaMalloc(&c.sink, 4));
  CK(cudaMalloc(&c.cnt, 4096 * 4));
  CK(cudaEventCreate(&c.a)); CK(cudaEventCreate(&c.b));
  Case<unsigned short> b; b.ty = "bf16";
  Case<float> f; f.ty = "f32";
  {
    srand(1234);
    std::vector<unsigned short> h(R * N);
    std::vector<float> hf(R * N);
    b.ref.assign(N, 0.0); f.ref.assign(N, 0.0);
    unsigned s = 12345;
    for (long long i = 0; i < R * N; ++i) {
      unsigned long long z = (unsigned long long)i + 0x9e3779b97f4a7c15ull * (s + 1);  // splitmix64
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      float x = ((unsigned)(z >> 40) * (1.0f / 16777216.0f)) * 4.f - 2.f;  // uniform [-2, 2)
      unsigned u; memcpy(&u, &x, 4);
      h[i] = (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
      hf[i] = x;
      b.ref[i % N] += bf2f(h[i]);
      f.ref[i % N] += x;
    }
    CK(cudaMalloc(&b.in, R * N * 2)); CK(cudaMalloc(&b.out, N * 2)); CK(cudaMalloc(&b.ws, 512 * N * 4));
    CK(cudaMalloc(&f.in, R * N * 4)); CK(cudaMalloc(&f.out, N * 4)); CK(cudaMalloc(&f.ws, 512 * N * 4));
    CK(cudaMemcpy(b.in, h.data(), R * N * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(f.in, hf.data(), R * N * 4, cudaMemcpyHostToDevice));
  }
  void* dst; CK(cudaMalloc(&dst, R * N * 4));
  const char* only = getenv("ONLY");
  for (int t = 0; t < 2; ++t) {
    const bool bf = t == 0;
    if (only && strcmp(only, bf ? "bf16" : "f32") != 0) continue;
    const char* ty = bf ? "bf16" : "f32";
    const double bytes = (double)R * N * (bf ? 2 : 4);
    void* src = bf ? (void*)b.in : (void*)f.in;
    timeit(c, "memcpy of the same bytes", ty, bytes, [&] { CK(cudaMemcpyAsync(dst, src, (size_t)bytes / 2, cudaMemcpyDeviceToDevice)); }, "");
    timeit(c, "bare read L0", ty, bytes, [&] { bare<0><<<1056, 256>>>((const uint4*)src, (long long)bytes / 16, c.sink); }, "");
    timeit(c, "bare read L1 (no_allocate)", ty, bytes, [&] { bare<1><<<1056, 256>>>((const uint4*)src, (long long)bytes / 16, c.sink); }, "");
    timeit(c, "bare read L2 (.cs)", ty, bytes, [&] { bare<2><<<1056, 256>>>((const uint4*)src, (long long)bytes / 16, c.sink); }, "");
    if (bf) {
      generated(c, b, bytes, [&] {
        run<unsigned short, 1, 8, 0, 8>(c, b, 32);
        run<unsigned short, 1, 8, 1, 8>(c, b, 32);
      });
    } else {
      generated(c, f, bytes, [&] { run<float, 1, 8, 0, 8>(c, f, 16); });
    }
  }
  return 0;
}
