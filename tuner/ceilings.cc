#include "tuner/ceilings.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_buffers.h"
#include "tuner/worker_nvrtc.h"

namespace kfuse {
namespace {

// The chains are independent (8 per thread) so latency does not hide the
// pipe's throughput; results feed a store that never happens (the buffers
// are zero) so the compiler keeps the work.
constexpr char kSource[] = R"(
extern "C" __global__ void kf_read(const float4* __restrict__ p, long long n, float* out) {
  float acc = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float4 v = __ldcs(p + i);
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) out[0] = acc;
}
extern "C" __global__ void kf_write(float4* __restrict__ p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    __stcs(p + i, make_float4(0.f, 0.f, 0.f, 0.f));
  }
}
extern "C" __global__ void kf_fma(float* out, int iters, float b, float c) {
  float a[8];
  for (int k = 0; k < 8; ++k) a[k] = threadIdx.x + k;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = fmaf(a[k], b, c);
  }
  float s = 0.f;
  for (int k = 0; k < 8; ++k) s += a[k];
  if (s == 1234.5f) out[0] = s;
}
extern "C" __global__ void kf_ex2(float* out, int iters) {
  float a[8];
  for (int k = 0; k < 8; ++k) a[k] = 0.001f * (threadIdx.x + k);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[k]));
      a[k] = -a[k];  // Keeps the values in (-1, 0]: ex2 of them stays bounded.
    }
  }
  float s = 0.f;
  for (int k = 0; k < 8; ++k) s += a[k];
  if (s == 1234.5f) out[0] = s;
}
extern "C" __global__ void kf_mma(float* out, int iters) {
  unsigned a0 = threadIdx.x, a1 = a0 ^ 1u, a2 = a0 ^ 2u, a3 = a0 ^ 3u;
  unsigned b0 = a0 * 3u, b1 = a0 * 5u;
  float d[4][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
          "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(d[k][0]), "+f"(d[k][1]), "+f"(d[k][2]), "+f"(d[k][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.f;
  for (int k = 0; k < 4; ++k) s += d[k][0] + d[k][1] + d[k][2] + d[k][3];
  if (s == 1234.5f) out[0] = s;
}
)";

struct Timer {
  const DriverApi* cu;
  CUstream stream;
  CUevent start = nullptr, end = nullptr;
  ~Timer() {
    if (start) cu->cuEventDestroy(start);
    if (end) cu->cuEventDestroy(end);
  }
  // The best (shortest) of `runs` timed calls of `launch`, in seconds.
  absl::StatusOr<double> Best(const std::function<CUresult()>& launch, int runs = 5) {
    KFUSE_RETURN_IF_ERROR(CuCheck(launch(), "ceilings warm-up launch"));
    double best = 1e30;
    for (int i = 0; i < runs; ++i) {
      cu->cuEventRecord(start, stream);
      KFUSE_RETURN_IF_ERROR(CuCheck(launch(), "ceilings launch"));
      cu->cuEventRecord(end, stream);
      KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventSynchronize(end), "ceilings kernel"));
      float ms = 0;
      KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime"));
      best = std::min(best, ms * 1e-3);
    }
    return best;
  }
};

}  // namespace

const std::string& CeilingsKernelSource() {
  static const std::string* s = new std::string(kSource);
  return *s;
}

absl::StatusOr<Ceilings> MeasureCeilingsOnDevice(const DeviceFingerprint& fp, CUstream stream) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  KFUSE_ASSIGN_OR_RETURN(std::string cubin,
                         CompileToCubin(CeilingsKernelSource(), ArchForDevice(fp)));
  CUmodule mod = nullptr;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuModuleLoadData(&mod, cubin.data()), "cuModuleLoadData"));
  struct Unload {
    const DriverApi* cu;
    CUmodule m;
    ~Unload() { cu->cuModuleUnload(m); }
  } unload{cu, mod};
  auto fn = [&](const char* name) -> absl::StatusOr<CUfunction> {
    CUfunction f = nullptr;
    KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuModuleGetFunction(&f, mod, name), name));
    return f;
  };
  KFUSE_ASSIGN_OR_RETURN(CUfunction read, fn("kf_read"));
  KFUSE_ASSIGN_OR_RETURN(CUfunction write, fn("kf_write"));
  KFUSE_ASSIGN_OR_RETURN(CUfunction fma, fn("kf_fma"));
  KFUSE_ASSIGN_OR_RETURN(CUfunction ex2, fn("kf_ex2"));
  KFUSE_ASSIGN_OR_RETURN(CUfunction mma, fn("kf_mma"));

  size_t free_bytes = 0, total = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo"));
  // Two buffers of 1 GiB (less on small GPUs), far past any L2.
  size_t bytes = std::min<size_t>(size_t{1} << 30, free_bytes / 4) & ~size_t{4095};
  if (bytes < (size_t{64} << 20))
    return absl::ResourceExhaustedError("too little free GPU memory to measure ceilings");
  KFUSE_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::Alloc(bytes));
  KFUSE_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Alloc(bytes));
  KFUSE_RETURN_IF_ERROR(a.Fill(0));
  KFUSE_RETURN_IF_ERROR(b.Fill(0));

  Timer t{cu, stream};
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventCreate(&t.start, CU_EVENT_DEFAULT), "cuEventCreate"));
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventCreate(&t.end, CU_EVENT_DEFAULT), "cuEventCreate"));

  const unsigned sms = static_cast<unsigned>(std::max(1, fp.sm_count));
  long long n4 = static_cast<long long>(bytes / 16);
  CUdeviceptr pa = a.ptr(), pb = b.ptr();
  auto launch = [&](CUfunction f, unsigned blocks, unsigned threads, std::vector<void*> args) {
    return cu->cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, stream, args.data(), nullptr);
  };
  Ceilings c;
  KFUSE_ASSIGN_OR_RETURN(double t_read, t.Best([&] {
    return launch(read, sms * 8, 512, {&pa, &n4, &pb});
  }));
  c.read_bw = bytes / t_read;
  KFUSE_ASSIGN_OR_RETURN(double t_write, t.Best([&] {
    return launch(write, sms * 8, 512, {&pa, &n4});
  }));
  c.write_bw = bytes / t_write;
  KFUSE_ASSIGN_OR_RETURN(double t_copy,
                         t.Best([&] { return cu->cuMemcpyDtoDAsync(pb, pa, bytes, stream); }));
  c.copy_bw = 2.0 * bytes / t_copy;

  int iters = 16384;
  float fb = 0.999f, fc = 0.001f;
  const unsigned blocks = sms * 8, threads = 256;
  const double lanes = static_cast<double>(blocks) * threads;
  KFUSE_ASSIGN_OR_RETURN(double t_fma, t.Best([&] {
    return launch(fma, blocks, threads, {&pb, &iters, &fb, &fc});
  }));
  c.fma_flops = lanes * iters * 8 * 2 / t_fma;
  int ex2_iters = 1024;
  KFUSE_ASSIGN_OR_RETURN(double t_ex2, t.Best([&] {
    return launch(ex2, blocks, threads, {&pb, &ex2_iters});
  }));
  c.special_flops = lanes * ex2_iters * 8 / t_ex2;
  if (fp.compute_capability() >= 80) {
    int mma_iters = 2048;
    KFUSE_ASSIGN_OR_RETURN(double t_mma, t.Best([&] {
      return launch(mma, blocks, threads, {&pb, &mma_iters});
    }));
    double warps = lanes / 32;
    c.tensor_flops = warps * mma_iters * 4 * (2.0 * 16 * 8 * 16) / t_mma;
  }
  c.measured = true;
  c.source = absl::StrCat("measured on ", fp.name);
  return c;
}

}  // namespace kfuse
