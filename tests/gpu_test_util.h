// What the GPU property tests share: the device (or why there is none) and
// device memory freed at scope exit, and the plan tensors and symbol table
// of a chain as the service fills them in. Tests skip when OpenGpu() fails.
#ifndef KFUSE_TESTS_GPU_TEST_UTIL_H_
#define KFUSE_TESTS_GPU_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clients/launcher.h"
#include "codegen/analysis.h"
#include "codegen/generators.h"
#include "codegen/numeric.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "gtest/gtest.h"
#include "core/status.h"
#include "kfuse/v1/kfuse.pb.h"
#include "service/convert.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"
#include "tuner/worker_shared_code.h"

namespace kfuse {
namespace gpu_test {

struct Gpu {
  const DriverApi* cu = nullptr;
  ScopedPrimaryContext ctx;
  std::string arch;
};

inline absl::StatusOr<Gpu> OpenGpu() {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  if (DeviceCount() == 0) return absl::UnavailableError("no CUDA device");
  KFUSE_ASSIGN_OR_RETURN(ScopedPrimaryContext ctx, ScopedPrimaryContext::Create(0));
  KFUSE_ASSIGN_OR_RETURN(DeviceFingerprint fp, QueryDevice(0));
  return Gpu{cu, std::move(ctx), ArchForDevice(fp)};
}

// Device memory freed at scope exit.
class DeviceMemory {
 public:
  explicit DeviceMemory(const DriverApi* cu) : cu_(cu) {}
  ~DeviceMemory() {
    for (CUdeviceptr p : ptrs_) cu_->cuMemFree(p);
  }
  CUdeviceptr Upload(const std::string& bytes) {
    CUdeviceptr p = Alloc(bytes.size());
    KFUSE_CHECK(cu_->cuMemcpyHtoD(p, bytes.data(), bytes.size()) == CUDA_SUCCESS);
    return p;
  }
  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    KFUSE_CHECK(cu_->cuMemAlloc(&p, std::max<size_t>(bytes, 16)) == CUDA_SUCCESS);
    ptrs_.push_back(p);
    return p;
  }
  std::string Download(CUdeviceptr p, size_t bytes) {
    std::string out(bytes, '\0');
    KFUSE_CHECK(cu_->cuMemcpyDtoH(out.data(), p, bytes) == CUDA_SUCCESS);
    return out;
  }

 private:
  const DriverApi* cu_;
  std::vector<CUdeviceptr> ptrs_;
};

inline std::vector<int64_t> ShapeOf(const TensorType& t, const std::vector<int64_t>& symbols) {
  std::vector<int64_t> s;
  for (const Dim& d : t.shape) s.push_back(d.is_static() ? d.size : symbols[d.symbol]);
  return s;
}

// Kernel `g`'s heuristic variant first, then up to three others spread
// over its family's space.
inline std::vector<Variant> SpreadVariants(const Chain& c, const KernelGroup& g) {
  std::vector<Variant> out = {FamilyHeuristic(c, g)};
  std::vector<Variant> space = FamilySpace(c, g);
  for (size_t i : {space.size() / 3, 2 * space.size() / 3, space.size() - 1}) {
    if (i < space.size() && std::find(out.begin(), out.end(), space[i]) == out.end())
      out.push_back(space[i]);
  }
  return out;
}

// The plan's tensors and symbol table, as the service fills them in.
inline v1::KernelPlan PlanFor(const Chain& c) {
  v1::KernelPlan plan;
  plan.set_api_version("kfuse.v1");
  for (const SymbolInfo& s : c.symbols) plan.add_symbols()->set_name(s.name);
  auto spec = [&](const TensorType& t, v1::TensorSpec* out) {
    out->set_dtype(static_cast<v1::DType>(t.dtype));
    for (const Dim& d : t.shape) {
      if (d.is_static())
        out->add_shape()->set_size(d.size);
      else
        out->add_shape()->set_symbol(c.symbols[d.symbol].name);
    }
  };
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    v1::TensorSpec* in = plan.add_inputs();
    in->set_name(absl::StrCat("in", n.input_index));
    spec(n.type, in);
    for (int64_t stride : n.strides) in->add_strides(stride);
    for (int axis = 0; axis < n.type.rank(); ++axis) {
      const Dim& d = n.type.shape[axis];
      if (d.is_static()) continue;
      v1::SymbolSource* src = plan.mutable_symbols(d.symbol)->add_sources();
      src->set_input(n.input_index);
      src->set_axis(axis);
    }
  }
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    v1::TensorSpec* out = plan.add_outputs();
    out->set_name(absl::StrCat("out", j));
    spec(c.nodes[c.outputs[j]].type, out);
  }
  return plan;
}

// A plan of several kernels as the service assembles one: PlanFor(c), then
// `kernels` in launch order with their intermediate buffers renumbered from
// node ids to positions in p.intermediates, and those buffers listed. `f64`:
// the kernels were emitted in kReference64, whose intermediates hold doubles.
inline absl::StatusOr<v1::KernelPlan> PlanOfKernels(const Chain& c, const Partition& p,
                                                    std::vector<CompiledKernel> kernels,
                                                    bool f64) {
  v1::KernelPlan plan = PlanFor(c);
  for (CompiledKernel& k : kernels) {
    KFUSE_RETURN_IF_ERROR(NumberIntermediates(p, &k.spec));
    *plan.add_kernels() = ToProto(k, /*include_source=*/false);
  }
  for (const IntermediateBuffer& b : IntermediateBuffers(c, p)) {
    v1::Intermediate* im = plan.add_intermediates();
    im->set_dtype(static_cast<v1::DType>(b.dtype));
    SizeExpr bytes = SizeExpr::Const(f64 ? 8 : DTypeBytes(b.dtype));
    for (const SizeExpr& d : b.shape) {
      *im->add_shape() = ToProto(d);
      bytes = SizeExpr::Mul(bytes, d);
    }
    if (f64) *im->mutable_bytes() = ToProto(bytes);
  }
  return plan;
}

// "row_reduction", "reduction+pointwise", ...: the plan's kernels in order.
inline std::string PlanShape(const Partition& p) {
  std::vector<std::string> names;
  for (const KernelGroup& g : p.kernels) names.push_back(std::string(FamilyName(g.family)));
  return absl::StrJoin(names, "+");
}

// One launch of a plan: each kernel's variant, and what to print for it.
struct PlanRun {
  std::vector<Variant> variants;
  std::string label;
};

// Every kernel at its heuristic, then for each kernel the other variants
// SpreadVariants picks, the other kernels at their heuristic.
inline std::vector<PlanRun> RunsOf(const Chain& c, const Partition& p) {
  std::vector<Variant> seeds;
  for (const KernelGroup& g : p.kernels) seeds.push_back(FamilyHeuristic(c, g));
  std::vector<PlanRun> runs = {{seeds, "heuristic"}};
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    std::vector<Variant> variants = SpreadVariants(c, p.kernels[k]);
    for (size_t j = 1; j < variants.size(); ++j) {
      PlanRun r{seeds, absl::StrCat("k", k, " ", variants[j].ToString())};
      r.variants[k] = variants[j];
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

// Host values as the bytes of a buffer of dtype `t` (f32, bf16, f16, i32, i64, bool).
inline std::string ToBytes(DType t, const std::vector<double>& v) {
  std::string out(v.size() * DTypeBytes(t), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    char* p = out.data() + i * DTypeBytes(t);
    if (t == DType::kF32) {
      float f = static_cast<float>(v[i]);
      std::memcpy(p, &f, 4);
    } else if (t == DType::kBF16) {
      uint16_t h = FloatToBF16(static_cast<float>(v[i]));
      std::memcpy(p, &h, 2);
    } else if (t == DType::kF16) {
      uint16_t h = FloatToHalf(static_cast<float>(v[i]));
      std::memcpy(p, &h, 2);
    } else if (t == DType::kI32) {
      const int32_t x = static_cast<int32_t>(v[i]);
      std::memcpy(p, &x, 4);
    } else if (t == DType::kI64) {
      const int64_t x = static_cast<int64_t>(v[i]);
      std::memcpy(p, &x, 8);
    } else {
      KFUSE_CHECK(t == DType::kBool);
      *p = v[i] != 0;
    }
  }
  return out;
}

// Fresh values uniform in [lo, hi], rounded to each input's dtype, one
// vector per chain input.
inline std::vector<std::vector<double>> UniformInputs(const Chain& c,
                                                      const std::vector<int64_t>& syms,
                                                      unsigned seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<std::vector<double>> in(c.num_inputs());
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    const int64_t count = static_cast<int64_t>(Elements(n.type, syms));
    for (int64_t i = 0; i < count; ++i) in[n.input_index].push_back(RoundTo(n.type.dtype, u(rng)));
  }
  return in;
}

// Eager's values (of an output of `dtype`) against the reference, as the
// check counts them: the largest error, how many elements differ and how
// many are far from their reference, over finite positions.
inline ErrorStats EagerError(DType dtype, const std::vector<double>& eager, const std::vector<double>& ref) {
  ErrorStats s;
  for (double r : ref) {
    if (std::isfinite(r)) s.max_abs_ref = std::max(s.max_abs_ref, std::abs(r));
  }
  const int dt = static_cast<int>(dtype);
  const double floor = shared_code::kf_far_floor(dt, s.max_abs_ref);
  for (size_t i = 0; i < eager.size(); ++i) {
    if (!std::isfinite(eager[i]) || !std::isfinite(ref[i])) continue;
    const double e = std::abs(eager[i] - ref[i]);
    s.max_abs_err = std::max(s.max_abs_err, e);
    s.mismatched += e > 0;
    if (shared_code::kf_far(dt, ref[i], eager[i], floor) && s.far++ == 0) s.first_far = static_cast<int64_t>(i);
  }
  return s;
}

// Input node `n`'s values `v` (dense, row-major) on the device at its
// strides, as a launcher buffer. The gaps a strided input's elements leave
// hold NaN (-77 in an integer buffer, true in a bool one), so that a kernel
// reading one shows it.
inline DeviceBuffer UploadInput(DeviceMemory& mem, const Node& n, const std::vector<double>& v,
                                const std::vector<int64_t>& syms) {
  const std::vector<int64_t> shape = ShapeOf(n.type, syms);
  if (n.strides.empty()) return DeviceBuffer{mem.Upload(ToBytes(n.type.dtype, v)), shape, {}, n.type.dtype};
  int64_t span = 1;
  for (size_t d = 0; d < shape.size(); ++d) span += (shape[d] - 1) * n.strides[d];
  const double gap = IsFloat(n.type.dtype) ? std::nan("") : n.type.dtype == DType::kBool ? 1 : -77;
  std::vector<double> laid(static_cast<size_t>(std::max<int64_t>(span, 0)), gap);
  for (size_t flat = 0; flat < v.size(); ++flat) {
    int64_t rest = static_cast<int64_t>(flat), at = 0;
    for (size_t d = shape.size(); d-- > 0;) {
      at += rest % shape[d] * n.strides[d];
      rest /= shape[d];
    }
    laid[static_cast<size_t>(at)] = v[flat];
  }
  return DeviceBuffer{mem.Upload(ToBytes(n.type.dtype, laid)), shape, n.strides, n.type.dtype};
}

// The chain's inputs `in` (host values) on the device, as launcher buffers.
inline std::vector<DeviceBuffer> UploadInputs(DeviceMemory& mem, const Chain& c,
                                              const std::vector<std::vector<double>>& in,
                                              const std::vector<int64_t>& syms) {
  std::vector<DeviceBuffer> out;
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    out.push_back(UploadInput(mem, n, in[n.input_index], syms));
  }
  return out;
}

// What checking one kernel of a one-kernel plan needs besides the kernel.
struct KernelCheck {
  NvrtcCompiler* nvrtc = nullptr;
  Launcher* launcher = nullptr;
  CompileOptions opts;
  const Chain* chain = nullptr;
  std::vector<int64_t> syms;
  const std::vector<DeviceBuffer>* inputs = nullptr;
  // The CPU evaluator's outputs: exact (kExact64) and eager (kEager).
  const std::vector<std::vector<double>>* exact = nullptr;
  const std::vector<std::vector<double>>* eager = nullptr;
  double slack = 2.0;
  int launches = 1;  // Launched this many times before the check.
};

// One buffer per output of `c` (doubles for the fp64 yardstick), filled with
// kPoisonByte so that an element a kernel leaves unwritten fails its check.
inline std::vector<DeviceBuffer> PoisonedOutputs(Gpu& gpu, DeviceMemory& mem, const Chain& c,
                                                 const std::vector<int64_t>& syms,
                                                 bool f64 = false) {
  std::vector<DeviceBuffer> outputs;
  for (int32_t o : c.outputs) {
    const TensorType& t = c.nodes[o].type;
    const size_t bytes = static_cast<size_t>(Elements(t, syms)) * (f64 ? 8 : DTypeBytes(t.dtype));
    CUdeviceptr p = mem.Alloc(bytes);
    EXPECT_EQ(gpu.cu->cuMemsetD8(p, kPoisonByte, bytes), CUDA_SUCCESS);
    outputs.push_back(DeviceBuffer{p, ShapeOf(t, syms), {}, t.dtype});
  }
  return outputs;
}

// One output's verdict and the eager error it was held to.
struct CheckedOutput {
  OutputCheck check;
  double eager_err = 0;
};

// Downloads each of `outputs` and checks it against the exact reference,
// with eager's error (`eager`) as the yardstick. `f64`: the outputs come from
// the fp64 yardstick kernels, which write doubles within rounding of the
// exact values (summed in another order than the evaluator).
inline std::vector<CheckedOutput> CheckOutputs(DeviceMemory& mem, const std::vector<DeviceBuffer>& outputs,
                                               const std::vector<std::vector<double>>& exact,
                                               const std::vector<std::vector<double>>& eager, double slack,
                                               bool f64 = false) {
  std::vector<CheckedOutput> checked;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const DType t = f64 ? DType::kF64 : outputs[j].dtype;
    const std::vector<double>& ref = exact[j];
    std::string got = mem.Download(outputs[j].ptr, ref.size() * DTypeBytes(t));
    CheckedOutput c;
    ErrorStats yardstick = EagerError(outputs[j].dtype, eager[j], ref);
    if (f64) {
      // The fp64 yardstick's own rounding: a plain double sum of n terms is
      // off by about sqrt(n) half-ulps of the total (7e-9 for 50257 terms
      // summing to 3.5e5), so the bound scales with the output, 2^-40 of
      // it: still 2^16 below an f32 ulp.
      double peak = 0;
      for (double v : ref) {
        if (std::isfinite(v)) peak = std::max(peak, std::fabs(v));
      }
      yardstick.max_abs_err = std::max(1e-9, 0x1p-40 * peak);
    }
    c.eager_err = yardstick.max_abs_err;
    c.check = CheckOutput(t, got.data(), ref, yardstick, slack, absl::StrCat("output ", j));
    checked.push_back(std::move(c));
  }
  return checked;
}

// Compiles `spec` (emitted under `numerics`) for this GPU, launches it as
// the chain's one kernel into outputs poisoned first (doubles for
// kReference64), and checks every output against the exact reference with
// eager's error as the yardstick. Failures name `what`.
inline void CheckKernel(Gpu& gpu, DeviceMemory& mem, const KernelSpec& spec, Numerics numerics,
                        const KernelCheck& k, const std::string& what) {
  const Chain& c = *k.chain;
  const bool f64 = numerics == Numerics::kReference64;
  absl::StatusOr<CompiledKernel> compiled = k.nvrtc->Compile(spec, k.opts);
  ASSERT_TRUE(compiled.ok()) << what << ": " << compiled.status();
  v1::KernelPlan plan = PlanFor(c);
  *plan.add_kernels() = ToProto(*compiled, /*include_source=*/false);
  std::vector<DeviceBuffer> outputs = PoisonedOutputs(gpu, mem, c, k.syms, f64);
  for (int rep = 0; rep < k.launches; ++rep) {
    absl::Status s = k.launcher->Launch(plan, *k.inputs, outputs, nullptr);
    ASSERT_TRUE(s.ok()) << what << ": " << s;
    ASSERT_EQ(gpu.cu->cuCtxSynchronize(), CUDA_SUCCESS) << what;
  }
  for (const CheckedOutput& out : CheckOutputs(mem, outputs, *k.exact, *k.eager, k.slack, f64)) {
    EXPECT_TRUE(out.check.ok) << what << ": " << out.check.message;
  }
}

}  // namespace gpu_test
}  // namespace kfuse

#endif  // KFUSE_TESTS_GPU_TEST_UTIL_H_
