// (run167: M from MROWS, each kernel also launched with an L2 access-policy window
// over the weights, streaming on hit and miss.) (run153: launch dims from list.txt, streamed variants too.) M = 64 GEMM + bias + tanh-GELU against 8192 x 8192 weights: the generated
// kernels (NVRTC cubins, list.txt) side by side, after an L2 flush by a
// 256 MB memset (do_bench's, the tuner's) and by reads; outputs compared
// bit for bit with the first kernel's and against a CPU fp64 reference on
// sampled rows.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
constexpr int N = 8192, K = 8192;
static int M = 64;
__global__ void flush(const uint4* p, size_t n, unsigned* sink) {
  unsigned a = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) a ^= p[i].x;
  if (a == 0x12345678) *sink = a;
}
static float bf(unsigned short h) { unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }
static unsigned short tobf(float f) { unsigned u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return u >> 16; }
int main() {
  if (getenv("MROWS")) M = atoi(getenv("MROWS"));
  cuInit(0);
  cudaFree(0);
  std::vector<unsigned short> hx(M * K), hw((size_t)K * N), hb(N);
  unsigned s = 12345;
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return ((s >> 8) & 0xffff) / 65536.f - 0.5f; };
  for (auto& v : hx) v = tobf(rnd() * 2);
  for (auto& v : hw) v = tobf(rnd() * 0.04f);
  for (auto& v : hb) v = tobf(rnd());
  unsigned short *x, *w, *b, *o; void* fl; unsigned* sink;
  cudaMalloc(&x, M * K * 2); cudaMalloc(&w, (size_t)K * N * 2); cudaMalloc(&b, N * 2); cudaMalloc(&o, M * N * 2);
  cudaMalloc(&fl, 256 << 20); cudaMalloc(&sink, 4);
  cudaMemcpy(x, hx.data(), M * K * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(w, hw.data(), (size_t)K * N * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb.data(), N * 2, cudaMemcpyHostToDevice);
  cudaMemset(fl, 1, 256 << 20);
  // fp64 reference on 6 rows.
  const int rows[] = {0, 1 % M, 17 % M, 31 % M, 32 % M, M - 1};
  std::vector<double> ref(6 * N);
  for (int ri = 0; ri < 6; ++ri)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += (double)bf(hx[rows[ri] * K + k]) * bf(hw[(size_t)k * N + n]);
      const double y = acc + bf(hb[n]);
      ref[ri * N + n] = 0.5 * y * (1 + std::tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)));
    }
  int max_window = 0;
  cuDeviceGetAttribute(&max_window, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 0);
  printf("M %d; max access-policy window %d bytes (weights %zu)\n", M, max_window, (size_t)K * N * 2);
  std::ifstream lf(getenv("LIST") ? getenv("LIST") : "list.txt");
  std::string line;
  std::vector<unsigned short> first;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  const double bytes = (double)K * N * 2 + M * K * 2 + N * 2 + M * N * 2;
  while (std::getline(lf, line)) {
    std::istringstream ls(line);
    std::string name, entry, desc; int smem, gx, gy, bx;
    ls >> name >> entry >> smem >> gx >> gy >> bx >> desc;
    CUmodule mod; CUfunction fn;
    if (cuModuleLoad(&mod, (name + ".cubin").c_str()) != CUDA_SUCCESS || cuModuleGetFunction(&fn, mod, entry.c_str()) != CUDA_SUCCESS) { printf("%s: no cubin\n", name.c_str()); continue; }
    cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
    auto get = [&](const char* key) { const char* p = strstr(desc.c_str(), key); return p ? atoi(p + strlen(key)) : 0; };
    (void)get;
    void* args[] = {&x, &w, &b, &o};
    int window = 0;  // 0: plain; 1: weights streaming on hit and miss; 2: weights normal (the attribute's own cost)
    auto launch = [&] {
      if (window == 0) return cuLaunchKernel(fn, gx, gy, 1, bx, 1, 1, smem, 0, args, nullptr);
      CUlaunchAttribute at[1];
      at[0].id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
      at[0].value.accessPolicyWindow.base_ptr = (void*)w;
      at[0].value.accessPolicyWindow.num_bytes = std::min<size_t>((size_t)K * N * 2, max_window);
      at[0].value.accessPolicyWindow.hitRatio = 1.0f;
      at[0].value.accessPolicyWindow.hitProp = window == 1 ? CU_ACCESS_PROPERTY_STREAMING : CU_ACCESS_PROPERTY_NORMAL;
      at[0].value.accessPolicyWindow.missProp = window == 1 ? CU_ACCESS_PROPERTY_STREAMING : CU_ACCESS_PROPERTY_NORMAL;
      CUlaunchConfig cfg = {};
      cfg.gridDimX = gx; cfg.gridDimY = gy; cfg.gridDimZ = 1; cfg.blockDimX = bx; cfg.blockDimY = 1; cfg.blockDimZ = 1;
      cfg.sharedMemBytes = smem; cfg.hStream = 0; cfg.attrs = at; cfg.numAttrs = 1;
      return cuLaunchKernelEx(&cfg, fn, args, nullptr);
    };
    cudaMemset(o, 0xff, M * N * 2);
    if (launch() != CUDA_SUCCESS) { printf("%s: launch failed\n", name.c_str()); continue; }
    cudaError_t err = cudaDeviceSynchronize();
    std::vector<unsigned short> out(M * N);
    cudaMemcpy(out.data(), o, M * N * 2, cudaMemcpyDeviceToHost);
    double maxerr = 0;
    for (int ri = 0; ri < 6; ++ri)
      for (int n = 0; n < N; ++n) maxerr = std::max(maxerr, std::fabs(bf(out[rows[ri] * N + n]) - ref[ri * N + n]));
    long long ndiff = 0;
    if (first.empty()) first = out; else for (int i = 0; i < M * N; ++i) ndiff += first[i] != out[i];
    for (int wm = 0; wm < 3; ++wm) {
    window = wm;
    if (window) {  // the windowed launch's outputs against the plain one's
      cudaMemset(o, 0xff, M * N * 2);
      if (launch() != CUDA_SUCCESS || cudaDeviceSynchronize() != cudaSuccess) { printf("%s window %d: launch failed\n", name.c_str(), window); continue; }
      std::vector<unsigned short> o2(M * N);
      cudaMemcpy(o2.data(), o, M * N * 2, cudaMemcpyDeviceToHost);
      long long nd = 0; for (int i = 0; i < M * N; ++i) nd += o2[i] != out[i];
      printf("%s window %d: %lld outputs differ from the plain launch's\n", name.c_str(), window, nd);
    }
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<float> t;
      for (int i = 0; i < 43; ++i) {
        if (mode == 0) cudaMemsetAsync(fl, 0, 256 << 20); else flush<<<1056, 512>>>((const uint4*)fl, (256 << 20) / 16, sink);
        cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (i >= 3) t.push_back(ms * 1000);
      }
      std::sort(t.begin(), t.end());
      printf("%-5s w%d %-7s median %6.2f us best %6.2f  %5.0f GB/s; max err %.3g (6 rows vs fp64), %lld outputs differ from the first kernel's; %s  %s\n",
             name.c_str(), window, mode ? "reads" : "memset", t[t.size() / 2], t[0], bytes / t[t.size() / 2] / 1e3, maxerr, ndiff,
             cudaGetErrorString(err), desc.c_str());
    }
    fflush(stdout);
    }
  }
}
