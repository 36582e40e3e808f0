// One row kernel at two row counts: every variant of RMSNorm's space (bf16,
// width 4096, rows symbolic, tuned for the 32768 bucket) timed at rows A and
// B (flush: a 256 MB memset, as the tuner's and do_bench's), beside a copy of
// the same bytes; outputs checked against fp64 on sampled rows.
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
static float bf(unsigned short h) { unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }
static unsigned short tobf(float f) { unsigned u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return u >> 16; }
__global__ void flush_reads(const int4* p, long long n, int* sink) {
  int acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) acc ^= p[i].x;
  if (acc == 0x12345678) *sink = acc;
}
int main(int argc, char** argv) {
  const bool by_reads = getenv("FLUSH") && std::string(getenv("FLUSH")) == "reads";
  const long long W = 4096, RA = argc > 1 ? atoll(argv[1]) : 32768, RB = argc > 2 ? atoll(argv[2]) : 20480;
  const long long RMAX = std::max(RA, RB);
  const bool softmax = getenv("SOFTMAX") != nullptr;  // list.txt of a softmax space (in0 -> out0).
  cuInit(0); cudaFree(0);
  std::vector<unsigned short> hx(RMAX * W), hw(W);
  unsigned s = 777;
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return ((s >> 8) & 0xffff) / 32768.f - 1.f; };
  for (auto& v : hx) v = tobf(rnd() * 3);
  for (auto& v : hw) v = tobf(1 + rnd() * 0.5f);
  unsigned short *x, *w, *o, *o2; void *fl, *ws;
  cudaMalloc(&x, RMAX * W * 2); cudaMalloc(&w, W * 2); cudaMalloc(&o, RMAX * W * 2); cudaMalloc(&o2, RMAX * W * 2);
  cudaMalloc(&fl, 256 << 20); cudaMalloc(&ws, 4096);
  cudaMemcpy(x, hx.data(), RMAX * W * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(w, hw.data(), W * 2, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  auto timeit = [&](auto launch) {
    std::vector<float> t;
    for (int i = 0; i < 43; ++i) {
      if (by_reads) flush_reads<<<1056, 512>>>((const int4*)fl, (256 << 20) / 16, (int*)ws); else cudaMemsetAsync(fl, 0, 256 << 20);
      cudaMemsetAsync(ws, 0, 4096);
      cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); if (i >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  double copy[2];
  const long long rows2[2] = {RA, RB};
  for (int j = 0; j < 2; ++j) {
    const size_t n = rows2[j] * W * 2;
    copy[j] = timeit([&] { cudaMemcpyAsync(o2, x, n, cudaMemcpyDeviceToDevice); });
    printf("copy   rows %6lld: %7.2f us %5.0f GB/s\n", rows2[j], copy[j], 2.0 * n / copy[j] / 1e3);
  }
  printf("copy at B / copy at A (GB/s): %.3f\n", (2.0 * RB / copy[1]) / (2.0 * RA / copy[0]));
  std::ifstream lf(getenv("LIST") ? getenv("LIST") : "list.txt");
  std::string line;
  while (std::getline(lf, line)) {
    std::istringstream ls(line);
    std::string name, entry, ps, desc; unsigned smem, block; long long ga, gb;
    ls >> name >> entry >> smem >> block >> ga >> gb >> ps >> desc;
    CUmodule mod; CUfunction fn;
    if (cuModuleLoad(&mod, (name + ".cubin").c_str()) != CUDA_SUCCESS || cuModuleGetFunction(&fn, mod, entry.c_str()) != CUDA_SUCCESS) { printf("%s: no cubin\n", name.c_str()); continue; }
    if (smem > 48 * 1024) cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
    double t[2], gbs[2], err = 0; bool ok = true;
    for (int j = 0; j < 2; ++j) {
      long long rows = rows2[j];
      std::vector<void*> args;
      std::istringstream pp(ps); std::string p;
      while (std::getline(pp, p, ',')) {
        if (p == "I0") args.push_back(&x); else if (p == "I1") args.push_back(&w); else if (p == "O0") args.push_back(&o);
        else if (p == "S") args.push_back(&rows); else if (p[0] == 'W') args.push_back(&ws);
      }
      const unsigned grid = (unsigned)(j ? gb : ga);
      auto launch = [&] { return cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, 0, args.data(), nullptr); };
      cudaMemset(o, 0xff, rows * W * 2); cudaMemset(ws, 0, 4096);
      if (launch() != CUDA_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) { printf("%s: launch failed\n", name.c_str()); ok = false; break; }
      const long long sample[] = {0, 1, 2, rows / 3, rows / 2, rows - 2, rows - 1};
      std::vector<unsigned short> y(W);
      for (long long r : sample) {
        cudaMemcpy(y.data(), o + r * W, W * 2, cudaMemcpyDeviceToHost);
        if (softmax) {
          double m = -INFINITY, sum = 0;
          for (long long c = 0; c < W; ++c) m = std::max(m, (double)bf(hx[r * W + c]));
          for (long long c = 0; c < W; ++c) sum += std::exp(bf(hx[r * W + c]) - m);
          for (long long c = 0; c < W; ++c) {
            const double g = bf(y[c]), ref = std::exp(bf(hx[r * W + c]) - m) / sum;
            err = std::max(err, std::isnan(g) ? 1e30 : std::fabs(g - ref));
          }
          continue;
        }
        double ss = 0;
        for (long long c = 0; c < W; ++c) { const double v = bf(hx[r * W + c]); ss += v * v; }
        const double inv = 1 / std::sqrt(ss / W + 0x1p-20);
        for (long long c = 0; c < W; ++c) {
          const double g = bf(y[c]), ref = bf(hx[r * W + c]) * inv * bf(hw[c]);
          err = std::max(err, std::isnan(g) ? 1e30 : std::fabs(g - ref));
        }
      }
      t[j] = timeit(launch);
      gbs[j] = 2.0 * rows * W * 2 / t[j] / 1e3;
    }
    if (!ok) continue;
    printf("%-4s A %7.2f us %5.0f GB/s (%.3f of copy)  B %7.2f us %5.0f GB/s (%.3f of copy)  B/A %.3f  max err %.3g  %s\n", name.c_str(), t[0], gbs[0],
           copy[0] / t[0], t[1], gbs[1], copy[1] / t[1], gbs[1] / gbs[0], err, desc.c_str());
    fflush(stdout);
  }
}
