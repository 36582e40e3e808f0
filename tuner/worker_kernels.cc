#include "tuner/worker_kernels.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_nvrtc.h"

namespace kfuse {
namespace {

using shared_code::KfPart;
using shared_code::KfPrep;

// What the shared element code needs from the device, with intrinsics.
constexpr char kPrelude[] = R"(
#define KF_HD __device__ __forceinline__
KF_HD float kf_f32_from_bits(unsigned int u) { return __uint_as_float(u); }
KF_HD unsigned int kf_bits_from_f32(float f) { return __float_as_uint(f); }
KF_HD double kf_f64_from_bits(unsigned long long u) { return __longlong_as_double((long long)u); }
KF_HD unsigned long long kf_bits_from_f64(double d) {
  return (unsigned long long)__double_as_longlong(d);
}
KF_HD double kf_dmul(double a, double b) { return __dmul_rn(a, b); }
)";

// Grid-stride kernels of 256 threads; the reductions are a shared-memory
// tree over the block, one partial per block. One kernel per job with the
// dtype a (warp-uniform) argument: per-dtype instances compiled 7x slower.
constexpr char kKernels[] = R"(
#define KF_FOR(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
       i += (long long)gridDim.x * blockDim.x)

KF_HD unsigned long long kf_load(const void* p, long long i, int size) {
  switch (size) {
    case 1: return ((const unsigned char*)p)[i];
    case 2: return ((const unsigned short*)p)[i];
    case 4: return ((const unsigned int*)p)[i];
  }
  return ((const unsigned long long*)p)[i];
}

extern "C" __global__ void __launch_bounds__(256)
kf_rand(void* out, long long n, unsigned long long key, int domain, int dt, int size, long long extent,
        long long other) {
  KF_FOR(i, n) {
    unsigned long long v = kf_rand_bits(dt, key, i, domain, extent, other);
    switch (size) {
      case 1: ((unsigned char*)out)[i] = (unsigned char)v; break;
      case 2: ((unsigned short*)out)[i] = (unsigned short)v; break;
      case 4: ((unsigned int*)out)[i] = (unsigned int)v; break;
      default: ((unsigned long long*)out)[i] = v; break;
    }
  }
}

extern "C" __global__ void __launch_bounds__(256)
kf_widen(const void* in, double* out, long long n, int dt, int size) {
  KF_FOR(i, n) out[i] = kf_decode(dt, kf_load(in, i, size));
}

extern "C" __global__ void __launch_bounds__(256)
kf_cmp(const void* got, const double* ref, long long n, KfPart* out, int dt, int size, double floor) {
  __shared__ KfPart s[256];
  KfPart p;
  kf_part_init(&p);
  KF_FOR(i, n) {
    double r = ref[i];
    unsigned long long raw = kf_load(got, i, size);
    kf_part_add(&p, i, r, kf_judged(dt, r, kf_decode(dt, raw)), kf_unwritten(dt, raw, r), dt, floor);
  }
  s[threadIdx.x] = p;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) kf_part_merge(&s[threadIdx.x], &s[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void __launch_bounds__(256)
kf_prep(double* ref, const void* eager, long long n, KfPrep* out, int dt, int size) {
  __shared__ KfPrep s[256];
  KfPrep p;
  kf_prep_init(&p);
  KF_FOR(i, n) ref[i] = kf_prep_add(&p, i, ref[i], dt, kf_load(eager, i, size));
  s[threadIdx.x] = p;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) kf_prep_merge(&s[threadIdx.x], &s[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
)";

int Index(DType t) { return static_cast<int>(t); }

bool Supported(DType t) { return Index(t) >= 1 && Index(t) <= 7; }

}  // namespace

int HelperBlocks(int64_t n) {
  int64_t b = (n + kHelperBlock - 1) / kHelperBlock;
  return static_cast<int>(std::clamp<int64_t>(b, 1, kHelperMaxBlocks));
}

const std::string& WorkerKernelSource() {
  static const std::string* s = new std::string(
      absl::StrCat("// kfuse-worker helpers: random inputs, comparison, reference preparation.\n",
                   kPrelude, shared_code::SharedSourceText(), "\n", kKernels));
  return *s;
}

CompareStats ReduceCompareParts(absl::Span<const KfPart> parts) {
  KfPart all;
  shared_code::kf_part_init(&all);
  for (const KfPart& p : parts) shared_code::kf_part_merge(&all, &p);
  CompareStats s;
  s.err.max_abs_err = all.max_err;
  s.err.max_abs_ref = all.max_ref;
  s.err.worst_index = all.worst;
  s.err.special_mismatches = all.special;
  s.err.first_special_mismatch = all.first_special;
  s.err.mismatched = all.mismatched;
  s.err.far = all.far;
  s.err.first_far = all.first_far;
  s.unwritten = all.unwritten;
  s.first_unwritten = all.first_unwritten;
  return s;
}

PrepStats ReducePrepParts(absl::Span<const KfPrep> parts) {
  KfPrep all;
  shared_code::kf_prep_init(&all);
  for (const KfPrep& p : parts) shared_code::kf_prep_merge(&all, &p);
  PrepStats s;
  s.ref_unwritten = all.ref_unwritten;
  s.first_ref_unwritten = all.first_ref_unwritten;
  s.eager_unwritten = all.eager_unwritten;
  s.first_eager_unwritten = all.first_eager_unwritten;
  return s;
}

absl::StatusOr<std::unique_ptr<WorkerKernels>> WorkerKernels::Create(const std::string& arch) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  absl::StatusOr<std::string> cubin = CompileToCubin(WorkerKernelSource(), arch);
  if (!cubin.ok()) {
    return absl::InternalError(
        absl::StrCat("the worker's helper kernels did not compile for ", arch, ": ",
                     cubin.status().message()));
  }
  std::unique_ptr<WorkerKernels> k(new WorkerKernels());
  KFUSE_RETURN_IF_ERROR(
      CuCheck(cu->cuModuleLoadData(&k->module_, cubin->data()), "cuModuleLoadData (helpers)"));
  for (auto [name, fn] : {std::make_pair("kf_rand", &k->rand_), std::make_pair("kf_cmp", &k->cmp_),
                          std::make_pair("kf_prep", &k->prep_),
                          std::make_pair("kf_widen", &k->widen_)}) {
    KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuModuleGetFunction(fn, k->module_, name), name));
  }
  KFUSE_ASSIGN_OR_RETURN(k->parts_, DeviceBuffer::Alloc(kHelperMaxBlocks * sizeof(KfPart)));
  return k;
}

WorkerKernels::~WorkerKernels() {
  if (module_ != nullptr) (*LoadDriver())->cuModuleUnload(module_);
}

absl::Status WorkerKernels::FillRandom(const DeviceBuffer& buf, const BufferSpec& spec,
                                       uint64_t seed, uint64_t index, CUstream stream) const {
  KFUSE_CHECK(Supported(spec.dtype));
  KFUSE_CHECK(buf.bytes() >= static_cast<size_t>(spec.elements) * DTypeBytes(spec.dtype));
  if (spec.elements <= 0) return absl::OkStatus();
  CUdeviceptr out = buf.ptr();
  long long n = spec.elements;
  unsigned long long key = shared_code::kf_rand_key(seed, index);
  int domain = static_cast<int>(spec.domain), dt = Index(spec.dtype), size = DTypeBytes(spec.dtype);
  long long extent = spec.index_extent, other = spec.index_other;
  void* args[] = {&out, &n, &key, &domain, &dt, &size, &extent, &other};
  // Many blocks: it is a generator, not a reduction; grid-stride past 2^16.
  const int64_t blocks = std::clamp<int64_t>((n + kHelperBlock - 1) / kHelperBlock, 1, 65536);
  return CuCheck((*LoadDriver())
                     ->cuLaunchKernel(rand_, static_cast<unsigned>(blocks), 1,
                                      1, kHelperBlock, 1, 1, 0, stream, args, nullptr),
                 "cuLaunchKernel (random inputs)");
}

absl::Status WorkerKernels::Widen(const DeviceBuffer& in, DType dtype, int64_t n,
                                  const DeviceBuffer& out, CUstream stream) const {
  KFUSE_CHECK(Supported(dtype));
  KFUSE_CHECK(in.bytes() >= static_cast<size_t>(n) * DTypeBytes(dtype));
  KFUSE_CHECK(out.bytes() >= static_cast<size_t>(n) * 8);
  if (n <= 0) return absl::OkStatus();
  CUdeviceptr src = in.ptr(), dst = out.ptr();
  long long nn = n;
  int dt = Index(dtype), size = DTypeBytes(dtype);
  void* args[] = {&src, &dst, &nn, &dt, &size};
  const int64_t blocks = std::clamp<int64_t>((n + kHelperBlock - 1) / kHelperBlock, 1, 65536);
  return CuCheck((*LoadDriver())
                     ->cuLaunchKernel(widen_, static_cast<unsigned>(blocks), 1, 1, kHelperBlock,
                                      1, 1, 0, stream, args, nullptr),
                 "cuLaunchKernel (widen)");
}

absl::StatusOr<CompareStats> WorkerKernels::Compare(CUdeviceptr got, DType dtype, CUdeviceptr ref,
                                                    int64_t n, CUstream stream) const {
  KFUSE_CHECK(Supported(dtype));
  const DriverApi* cu = *LoadDriver();
  CUdeviceptr out = parts_.ptr();
  long long nn = n;
  int dt = Index(dtype), size = DTypeBytes(dtype);
  const int blocks = HelperBlocks(n);
  auto pass = [&](double floor) -> absl::StatusOr<CompareStats> {
    void* args[] = {&got, &ref, &nn, &out, &dt, &size, &floor};
    KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuLaunchKernel(cmp_, blocks, 1, 1, kHelperBlock,
                                                     1, 1, 0, stream, args, nullptr),
                                  "cuLaunchKernel (compare)"));
    KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuStreamSynchronize(stream), "compare kernel"));
    const size_t bytes = blocks * sizeof(KfPart);
    std::vector<KfPart> parts(blocks);
    KFUSE_RETURN_IF_ERROR(parts_.CopyOut(0, parts.data(), bytes));
    return ReduceCompareParts(parts);
  };
  // The far count's floor follows the largest reference value: a first pass
  // finds it (16-bit floats only; other types count none).
  if (shared_code::kf_far_eps(dt) == 0) return pass(-1);
  KFUSE_ASSIGN_OR_RETURN(CompareStats first, pass(-1));
  return pass(shared_code::kf_far_floor(dt, first.err.max_abs_ref));
}

absl::StatusOr<PrepStats> WorkerKernels::Prepare(CUdeviceptr ref, CUdeviceptr eager,
                                                 DType eager_dtype, int64_t n,
                                                 CUstream stream) const {
  KFUSE_CHECK(Supported(eager_dtype));
  const DriverApi* cu = *LoadDriver();
  CUdeviceptr out = parts_.ptr();
  long long nn = n;
  int dt = Index(eager_dtype), size = DTypeBytes(eager_dtype);
  void* args[] = {&ref, &eager, &nn, &out, &dt, &size};
  const int blocks = HelperBlocks(n);
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuLaunchKernel(prep_, blocks, 1, 1,
                                                   kHelperBlock, 1, 1, 0, stream, args, nullptr),
                                "cuLaunchKernel (reference preparation)"));
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuStreamSynchronize(stream), "reference preparation kernel"));
  const size_t bytes = blocks * sizeof(KfPrep);
  std::vector<KfPrep> parts(blocks);
  KFUSE_RETURN_IF_ERROR(parts_.CopyOut(0, parts.data(), bytes));
  return ReducePrepParts(parts);
}

absl::StatusOr<double> ElementAt(CUdeviceptr buf, DType dtype, int64_t i) {
  const int bytes = DTypeBytes(dtype);
  unsigned char host[8] = {};
  KFUSE_RETURN_IF_ERROR(CuCheck(
      (*LoadDriver())->cuMemcpyDtoH(host, buf + static_cast<CUdeviceptr>(i) * bytes, bytes),
      "cuMemcpyDtoH (one element)"));
  return ElementToDouble(dtype, host, 0);
}

}  // namespace kfuse
