// f32 softmax over rows of W (default 50257), R rows (default 4096): each
// kernel of list.txt (row/14 sources v*, their online passes' plain twins
// p*) checked on sampled rows against fp64 on two inputs (x uniform in
// [-4, 4]: "spread"; the same times 2^-21: "flat", a near-uniform row), in
// units of 2^-24 of the row's largest output, then timed on "spread" after a
// 256 MB memset (median of 40), beside cudaMemcpy of the same bytes.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
int main() {
  const long long W = getenv("W") ? atoll(getenv("W")) : 50257, R = getenv("R") ? atoll(getenv("R")) : 4096;
  cuInit(0); cudaFree(0);
  std::vector<float> hs(R * W), hf(R * W);
  unsigned s = 12345;
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return ((s >> 8) & 0xffff) / 32768.f - 1.f; };
  for (long long i = 0; i < R * W; ++i) { hs[i] = rnd() * 4; hf[i] = hs[i] * 0x1p-21f; }
  float *xs, *xf, *o; void *fl, *ws;
  const size_t bytes = R * W * 4;
  cudaMalloc(&xs, bytes); cudaMalloc(&xf, bytes); cudaMalloc(&o, bytes); cudaMalloc(&fl, 256 << 20); cudaMalloc(&ws, 4096);
  cudaMemcpy(xs, hs.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(xf, hf.data(), bytes, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timeit = [&](auto launch) {
    std::vector<float> t;
    for (int i = 0; i < 43; ++i) {
      cudaMemsetAsync(fl, 0, 256 << 20);
      cudaMemsetAsync(ws, 0, 4096);
      cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (i >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double copy = timeit([&] { cudaMemcpyAsync(o, xs, bytes, cudaMemcpyDeviceToDevice); });
  printf("copy %.1f us %.0f GB/s (W %lld, R %lld)\n", copy, 2.0 * bytes / copy / 1e3, W, R);
  std::ifstream lf("list.txt");
  std::string line;
  while (std::getline(lf, line)) {
    std::istringstream ls(line);
    std::string name, entry, ps, desc; unsigned smem, block; long long ga, gb;
    ls >> name >> entry >> smem >> block >> ga >> gb >> ps >> desc;
    CUmodule mod; CUfunction fn;
    if (cuModuleLoad(&mod, (name + ".cubin").c_str()) != CUDA_SUCCESS || cuModuleGetFunction(&fn, mod, entry.c_str()) != CUDA_SUCCESS) { printf("%s: no cubin\n", name.c_str()); continue; }
    if (smem > 48 * 1024) cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
    double err[2] = {0, 0};
    long long rows = R;
    float* x = xs;
    std::vector<void*> args;
    std::istringstream pp(ps); std::string p;
    while (std::getline(pp, p, ',')) {
      if (p == "I0") args.push_back(&x); else if (p == "O0") args.push_back(&o);
      else if (p == "S") args.push_back(&rows); else if (p[0] == 'W') args.push_back(&ws);
    }
    auto launch = [&] { return cuLaunchKernel(fn, (unsigned)ga, 1, 1, block, 1, 1, smem, 0, args.data(), nullptr); };
    bool ok = true;
    for (int d = 0; d < 2 && ok; ++d) {
      x = d ? xf : xs;
      const std::vector<float>& hx = d ? hf : hs;
      cudaMemset(o, 0xff, bytes); cudaMemset(ws, 0, 4096);
      if (launch() != CUDA_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) { printf("%s: launch failed\n", name.c_str()); ok = false; break; }
      std::vector<float> y(W);
      for (long long r : {0LL, 1LL, R / 3, R / 2, R - 2, R - 1}) {
        cudaMemcpy(y.data(), o + r * W, W * 4, cudaMemcpyDeviceToHost);
        double m = -INFINITY, sum = 0, top = 0;
        for (long long c = 0; c < W; ++c) m = std::max(m, (double)hx[r * W + c]);
        for (long long c = 0; c < W; ++c) sum += std::exp(hx[r * W + c] - m);
        for (long long c = 0; c < W; ++c) top = std::max(top, std::exp(hx[r * W + c] - m) / sum);
        for (long long c = 0; c < W; ++c) {
          const double ref = std::exp(hx[r * W + c] - m) / sum;
          err[d] = std::max(err[d], std::isnan(y[c]) ? 1e30 : std::fabs(y[c] - ref) / top / 0x1p-24);
        }
      }
    }
    if (!ok) continue;
    x = xs;
    const double t = timeit(launch);
    printf("%-4s %8.1f us %5.0f GB/s (%.3f of copy)  err spread %6.2f flat %6.2f  %s\n", name.c_str(), t, 2.0 * bytes / t / 1e3,
           copy / t, err[0], err[1], desc.c_str());
    fflush(stdout);
  }
}
