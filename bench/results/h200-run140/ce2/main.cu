// Row kernels before and after one generator change, side by side on the
// same data (bf16 logits [2670, 50257], int64 labels): the cross-entropy's
// looped pass, an ATen trace's nll_loss of _log_softmax, and the 50257-wide
// softmax (bulk-staged, rows from a counter). Each timed 25 times after a
// flush (by reads, or a 256 MB memset with FLUSH_WRITE), before, after,
// before again; the median. Outputs compared between the two and, on
// sampled rows, against fp64.
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
typedef unsigned short bf;
#define B const bf* __restrict__
#define O bf* __restrict__
extern "C" __global__ void kf_row_0e56f9b54fa9(B, const long long* __restrict__, O, O, O);  // ce, before
extern "C" __global__ void kf_row_2957d15152b9(B, const long long* __restrict__, O, O, O);  // ce, after
extern "C" __global__ void kf_row_4de8f734a9aa(B, const long long* __restrict__, O);  // nll, before
extern "C" __global__ void kf_row_7d9e6b21f074(B, const long long* __restrict__, O);  // nll, after
extern "C" __global__ void kf_row_9f0318f2f65d(B, O, const long long, unsigned* __restrict__);  // softmax, before
extern "C" __global__ void kf_row_90bed014fae6(B, O, const long long, unsigned* __restrict__);  // softmax, after

extern "C" __global__ void flush_read(const uint4* __restrict__ p, long long n, unsigned* sink) {
  unsigned acc = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) acc += p[i].x;
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

static float f(bf b) { unsigned u = (unsigned)b << 16; float x; memcpy(&x, &u, 4); return x; }
constexpr long long W = 50257;

int main() {
  const long long R = 2670, n = R * W;
  const bool fw = getenv("FLUSH_WRITE") != nullptr;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::vector<bf> hx(n);
  std::vector<long long> hl(R);
  std::mt19937_64 g(4321);
  std::normal_distribution<float> nd(0.f, 2.f);
  for (long long i = 0; i < n; ++i) {
    float v = nd(g); unsigned u; memcpy(&u, &v, 4);
    hx[i] = (bf)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
  }
  for (long long r = 0; r < R; ++r) hl[r] = g() % 10 == 0 ? -100 : (long long)(g() % W);
  bf *x, *y[2], *o[2][3]; long long* lab; unsigned *counter, *sink; void* fl;
  const size_t fl_bytes = 256ull << 20;
  CK(cudaMalloc(&x, n * 2)); CK(cudaMalloc(&lab, R * 8));
  for (int k = 0; k < 2; ++k) { CK(cudaMalloc(&y[k], n * 2)); for (int j = 0; j < 3; ++j) CK(cudaMalloc(&o[k][j], R * 2)); }
  CK(cudaMalloc(&counter, 4)); CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&fl, fl_bytes));
  CK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(lab, hl.data(), R * 8, cudaMemcpyHostToDevice));
  CK(cudaMemset(fl, 1, fl_bytes));
  const int smem = 2 * 50304 * 2;
  CK(cudaFuncSetAttribute(kf_row_9f0318f2f65d, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(kf_row_90bed014fae6, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto time = [&](auto launch) {
    std::vector<float> t;
    for (int i = 0; i < 25; ++i) {
      if (fw) CK(cudaMemsetAsync(fl, 0, fl_bytes));
      else flush_read<<<prop.multiProcessorCount * 4, 512>>>((const uint4*)fl, fl_bytes / 16, sink);
      CK(cudaEventRecord(e0));
      launch();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms * 1e3f);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  auto pair = [&](const char* name, double bytes, auto before, auto after) {
    const float a = time(before), b = time(after), a2 = time(before);
    printf("%-10s before %7.1f us, after %7.1f us, before again %7.1f us: %+.1f%% (%.0f -> %.0f GB/s)\n", name, a, b, a2,
           100.0 * (b - 0.5 * (a + a2)) / (0.5 * (a + a2)), bytes / (0.5 * (a + a2)) / 1e3, bytes / b / 1e3);
  };
  printf("flush by %s\n", fw ? "a 256 MB memset" : "reads");
  pair("ce", n * 2.0, [&] { kf_row_0e56f9b54fa9<<<R, 512>>>(x, lab, o[0][0], o[0][1], o[0][2]); },
       [&] { kf_row_2957d15152b9<<<R, 512>>>(x, lab, o[1][0], o[1][1], o[1][2]); });
  std::vector<bf> h[2][3];
  for (int k = 0; k < 2; ++k) for (int j = 0; j < 3; ++j) { h[k][j].resize(R); CK(cudaMemcpy(h[k][j].data(), o[k][j], R * 2, cudaMemcpyDeviceToHost)); }
  // Per row fp64 max and sum of exps on sampled rows.
  std::vector<double> mx(R, 0), se(R, 0);
  for (long long r = 0; r < R; r += 53) {
    double m = -INFINITY, s = 0;
    for (long long c = 0; c < W; ++c) m = std::max(m, (double)f(hx[r * W + c]));
    for (long long c = 0; c < W; ++c) s += std::exp((double)f(hx[r * W + c]) - m);
    mx[r] = m; se[r] = s;
  }
  {
    int differ = 0; double err[2] = {0, 0};
    for (long long r = 0; r < R; ++r) {
      differ += h[0][0][r] != h[1][0][r] || h[0][1][r] != h[1][1][r] || h[0][2][r] != h[1][2][r];
      if (r % 53) continue;
      for (int k = 0; k < 2; ++k) err[k] = std::max(err[k], std::fabs(f(h[k][0][r]) - se[r]) / se[r]);
    }
    printf("  ce: rows whose outputs differ %d of %lld; sum of exps against fp64 (relative, sampled): before %.3g, after %.3g\n", differ, R, err[0], err[1]);
  }
  pair("nll", n * 2.0, [&] { kf_row_4de8f734a9aa<<<R, 512>>>(x, lab, o[0][0]); },
       [&] { kf_row_7d9e6b21f074<<<R, 512>>>(x, lab, o[1][0]); });
  for (int k = 0; k < 2; ++k) CK(cudaMemcpy(h[k][0].data(), o[k][0], R * 2, cudaMemcpyDeviceToHost));
  {
    int differ = 0; double err[2] = {0, 0};
    for (long long r = 0; r < R; ++r) {
      differ += h[0][0][r] != h[1][0][r];
      if (r % 53 || hl[r] < 0) continue;
      const double want = f(hx[r * W + hl[r]]) - mx[r] - std::log(se[r]);
      for (int k = 0; k < 2; ++k) err[k] = std::max(err[k], std::fabs(f(h[k][0][r]) - want));
    }
    printf("  nll: rows whose log-probability differs %d of %lld; against fp64 (sampled): before %.3g, after %.3g\n", differ, R, err[0], err[1]);
  }
  pair("softmax", n * 4.0,
       [&] { CK(cudaMemsetAsync(counter, 0, 4)); kf_row_9f0318f2f65d<<<prop.multiProcessorCount, 512, smem>>>(x, y[0], R, counter); },
       [&] { CK(cudaMemsetAsync(counter, 0, 4)); kf_row_90bed014fae6<<<prop.multiProcessorCount, 512, smem>>>(x, y[1], R, counter); });
  {
    const float c = time([&] { CK(cudaMemcpyAsync(y[0], x, n * 2, cudaMemcpyDeviceToDevice)); });
    printf("  cudaMemcpy of the softmax's bytes: %.1f us (%.0f GB/s)\n", c, n * 4.0 / c / 1e3);
    // The copy overwrote y[0]: run `before` once more for the comparison.
    CK(cudaMemset(counter, 0, 4));
    kf_row_9f0318f2f65d<<<prop.multiProcessorCount, 512, smem>>>(x, y[0], R, counter);
    CK(cudaDeviceSynchronize());
    std::vector<bf> a(n), b(n);
    CK(cudaMemcpy(a.data(), y[0], n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), y[1], n * 2, cudaMemcpyDeviceToHost));
    long long differ = 0; double err[2] = {0, 0};
    for (long long i = 0; i < n; ++i) differ += a[i] != b[i];
    for (long long r = 0; r < R; r += 53) {
      for (long long c2 = 0; c2 < W; ++c2) {
        const double want = std::exp((double)f(hx[r * W + c2]) - mx[r]) / se[r];
        err[0] = std::max(err[0], std::fabs(f(a[r * W + c2]) - want));
        err[1] = std::max(err[1], std::fabs(f(b[r * W + c2]) - want));
      }
    }
    printf("  softmax: %lld of %lld outputs differ; against fp64 (sampled rows): before %.3g, after %.3g\n", differ, n, err[0], err[1]);
  }
  return 0;
}
