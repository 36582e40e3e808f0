// GPU property test of the row family: softmax (bf16, plain and with a fully
// masked row: NaN as torch.softmax), LayerNorm (f32) and residual RMSNorm (bf16)
// at widths 1000 .. 50257 and an odd row count, every variant of the space
// compiled with NVRTC for this GPU, launched through the C++ Launcher and
// compared with the CPU fp64 evaluator, with eager PyTorch's error (the CPU
// kEager evaluator) as the yardstick. Skips without a GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/launcher.h"
#include "codegen/analysis.h"
#include "codegen/cuda_prelude.h"
#include "codegen/evaluate.h"
#include "codegen/generators.h"
#include "codegen/numeric.h"
#include "codegen/partition.h"
#include "codegen/row.h"
#include "codegen/row_test_chains.h"
#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "service/convert.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"
#include "tuner/search.h"

namespace kfuse {
namespace {

constexpr int64_t kRows = 7;  // Odd: the last block of multi-row variants is partial.
constexpr double kSlack = 2.0;

// Inputs of `c`: values in [-4, 4] (positive weights), masks true with
// probability 0.9 and all false in row 0.
std::vector<std::vector<double>> Inputs(const Chain& c, const std::vector<int64_t>& syms,
                                        unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-4, 4);
  std::vector<std::vector<double>> in(c.num_inputs());
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    const int64_t count = static_cast<int64_t>(Elements(n.type, syms));
    const int64_t width = n.type.shape.back().is_static() ? n.type.shape.back().size : 1;
    std::vector<double>& v = in[n.input_index];
    for (int64_t i = 0; i < count; ++i) {
      if (n.type.dtype == DType::kBool) {
        v.push_back(i >= width && u(rng) > -3.2 ? 1 : 0);
      } else {
        v.push_back(RoundTo(n.type.dtype, u(rng)));
      }
    }
  }
  return in;
}

using gpu_test::DeviceMemory;
using gpu_test::PlanFor;
using gpu_test::Gpu;
using gpu_test::OpenGpu;

// Every variant of `c`'s one row kernel and the fp64 yardstick the tuner
// checks them with, launched on fresh inputs drawn from `seed`, against the
// CPU's fp64 values with eager's error as the yardstick.
void CheckEveryVariant(Gpu& gpu, const std::string& name, const Chain& c, unsigned seed) {
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu.cu);
  CompileOptions opts;
  opts.arch = gpu.arch;
  const std::vector<int64_t> syms(c.symbols.size(), kRows);
  absl::StatusOr<Partition> partition = PartitionChain(c);
  ASSERT_TRUE(partition.ok()) << partition.status();
  ASSERT_EQ(partition->kernels.size(), 1u);
  KernelGroup g = partition->kernels[0];
  auto in = Inputs(c, syms, seed);
  auto exact = Evaluate(c, in, syms, EvalMode::kExact64);
  auto eager = Evaluate(c, in, syms, EvalMode::kEager);
  ASSERT_TRUE(exact.ok() && eager.ok());
  if (name == "masked_softmax_bf16") {
    ASSERT_TRUE(std::isnan((*exact)[0][0])) << "a fully masked row is NaN";
  }
  DeviceMemory mem(gpu.cu);
  const std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, in, syms);
  v1::KernelPlan plan = PlanFor(c);
  std::vector<std::pair<Variant, Numerics>> runs;
  bool few_blocks = false;
  for (const Variant& v : FamilySpace(c, g)) {
    // Split rows need clusters (sm_90).
    if (RowMinComputeCapability(v) > ComputeCapabilityOf(gpu.arch)) continue;
    runs.push_back({v, Numerics::kFast});
    // The first bulk-staged variant also with fewer blocks than rows
    // (two and three): a block loops over several, its buffers refilled
    // and their barriers' phases flipping.
    if (v.Get("resident") == 3 && !few_blocks) {
      few_blocks = true;
      for (int blocks : {2, 3}) {
        Variant few = v;
        few.params["grid"] = blocks;
        runs.push_back({few, Numerics::kFast});
      }
    }
  }
  runs.push_back({FamilyHeuristic(c, g), Numerics::kReference64});
  for (const auto& [v, numerics] : runs) {
    const bool yardstick = numerics == Numerics::kReference64;
    // Through the family's entry: a kernel reading a slice of an input in
    // place is generated from its own chain and renumbered back.
    absl::StatusOr<KernelSpec> spec = EmitFamily(c, g, v, numerics);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
    ASSERT_TRUE(k.ok()) << k.status();
    plan.clear_kernels();
    *plan.add_kernels() = ToProto(*k, /*include_source=*/false);
    std::vector<DeviceBuffer> outputs = gpu_test::PoisonedOutputs(gpu, mem, c, syms, yardstick);
    absl::Status s = launcher.Launch(plan, inputs, outputs, nullptr);
    ASSERT_TRUE(s.ok()) << v.ToString() << ": " << s;
    ASSERT_EQ(gpu.cu->cuCtxSynchronize(), CUDA_SUCCESS) << v.ToString();
    for (const auto& out : gpu_test::CheckOutputs(mem, outputs, *exact, *eager, kSlack, yardstick)) {
      EXPECT_TRUE(out.check.ok) << v.ToString() << ": " << out.check.message;
    }
  }
}

TEST(GpuRowTest, EveryVariantMatchesReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  for (int64_t w : {1000, 1001, 1024, 4096, 5120, 8192, 50257}) {
    std::vector<std::pair<std::string, Chain>> chains = {
        {"masked_softmax_bf16", row_test::Softmax(DType::kBF16, -kRows, w, true)},
        {"softmax_bf16", row_test::Softmax(DType::kBF16, -kRows, w)},
        {"softmax_f32", row_test::Softmax(DType::kF32, -kRows, w)},
        {"shared_mask_softmax_f32", row_test::Softmax(DType::kF32, -kRows, w, true, false)},
        {"log_softmax_f32", row_test::Softmax(DType::kF32, kRows, w, false, true, true)},
        {"layer_norm_f32", row_test::LayerNorm(DType::kF32, -kRows, w)},
        {"rms_residual_bf16", row_test::RmsNormResidual(DType::kBF16, -kRows, w)},
        {"row_stats_f32", row_test::RowStats(DType::kF32, kRows, w)},
    };
    // Element functions called out of line: a register-held and a wide row.
    if (w == 1001 || w == 50257) {
      chains.push_back({"long_chain_softmax_f32", row_test::LongChainSoftmax(DType::kF32, -kRows, w)});
      // Near-uniform rows: every f32 sum of a thread's many terms compensated.
      chains.push_back({"near_uniform_softmax_f32", row_test::NearUniformSoftmax(DType::kF32, -kRows, w)});
    }
    for (const auto& [name, c] : chains) {
      SCOPED_TRACE(absl::StrCat(name, " W=", w));
      CheckEveryVariant(*gpu, name, c, static_cast<unsigned>(w));
    }
  }
}

// Inputs at strides of their own, their gaps NaN: slices of a wider tensor
// (one of a fused projection's q, k, v; a padded vocabulary), padded rows
// that keep or break the vectors' phase, a transpose, three row
// coordinates at strides of their own; and chains slicing a dense input
// that the row kernel reads in place.
TEST(GpuRowTest, StridedRowsMatchReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  using row_test::Strided;
  const std::vector<std::pair<std::string, Chain>> chains = {
      {"qkv_slice_softmax_bf16", Strided(row_test::Softmax(DType::kBF16, -kRows, 4096), 0, {3 * 4096, 1})},
      {"rows_4100_apart_softmax_bf16", Strided(row_test::Softmax(DType::kBF16, -kRows, 4096), 0, {4100, 1})},
      {"peeled_rows_1009_apart_softmax_bf16",
       Strided(row_test::Softmax(DType::kBF16, -kRows, 1001), 0, {1009, 1})},
      {"padded_vocab_softmax_bf16", Strided(row_test::Softmax(DType::kBF16, -kRows, 50257), 0, {50304, 1})},
      {"padded_vocab_softmax_f32", Strided(row_test::Softmax(DType::kF32, -kRows, 50257), 0, {50262, 1})},
      {"transposed_layer_norm_f32", Strided(row_test::LayerNorm(DType::kF32, kRows, 1024), 0, {1, kRows})},
      {"strided_residual_rms_bf16",
       Strided(row_test::RmsNormResidual(DType::kBF16, -kRows, 4096), 2, {8192, 1})},
      {"padded_3d_softmax_f32", row_test::PaddedSoftmax3D(DType::kF32, 2, 3, 1000, 1008, 4096)},
      // Slices of inputs the row kernel reads in place (op 0 of the chain).
      {"k_of_qkv_rms_norm_bf16", row_test::SlicedRmsNorm(DType::kBF16, -kRows, 3 * 1024, 1024, 1024)},
      {"sliced_peeled_rms_norm_bf16", row_test::SlicedRmsNorm(DType::kBF16, -kRows, 2009, 1008, 1001)},
      {"sliced_rms_norm_f32", row_test::SlicedRmsNorm(DType::kF32, -kRows, 50304, 8, 50257 + 39)},
      // Peeled rows beside inputs laid out otherwise (a weight, a bias, a
      // mask broadcast over rows): windows of 16, 8 and 4 bytes.
      {"odd_layer_norm_f32", row_test::LayerNorm(DType::kF32, kRows, 1001)},
      {"odd_layer_norm_bf16", row_test::LayerNorm(DType::kBF16, kRows, 1003)},
      {"odd_masked_softmax_f32", row_test::Softmax(DType::kF32, kRows, 1001, true, false)},
  };
  for (const auto& [name, c] : chains) {
    SCOPED_TRACE(name);
    CheckEveryVariant(*gpu, name, c, 11);
  }
}

// kf_mul3, the f32 norms' x * r * w: within half an ulp of the exact
// product (eager's two roundings are not, for a good share of random
// factors), and the plain product's value wherever that is not finite.
TEST(GpuRowTest, Mul3RoundsOnceAndKeepsSpecialValues) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  PreludeNeeds needs;
  needs.mul3 = true;
  KernelSpec spec;
  spec.entry = "kf_mul3_test";
  spec.source = CudaPrelude(needs) + R"(
extern "C" __global__ void kf_mul3_test(const float* a, const float* b, const float* c, float* y,
                                        int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = kf_mul3(a[i], b[i], c[i]);
}
)";
  CompileOptions opts;
  opts.arch = gpu->arch;
  absl::StatusOr<CompiledKernel> k = NvrtcCompiler().Compile(spec, opts);
  ASSERT_TRUE(k.ok()) << k.status();
  // Every triple of special and extreme factors, then random ones.
  const float inf = INFINITY;
  const std::vector<float> specials = {0.0f, -0.0f, inf,    -inf,    NAN,      1e30f,
                                       -3e38f, 1e-30f, 1e-45f, 1.0f, -2.5f, 3.4e38f};
  std::vector<float> a, b, c;
  for (float x : specials) {
    for (float y : specials) {
      for (float z : specials) {
        a.push_back(x);
        b.push_back(y);
        c.push_back(z);
      }
    }
  }
  const size_t n_special = a.size();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4, 4);
  for (int i = 0; i < 1 << 20; ++i) {
    a.push_back(u(rng));
    b.push_back(u(rng));
    c.push_back(u(rng));
  }
  const int n = static_cast<int>(a.size());
  const auto bytes = [](const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  };
  DeviceMemory mem(gpu->cu);
  CUdeviceptr pa = mem.Upload(bytes(a)), pb = mem.Upload(bytes(b)), pc = mem.Upload(bytes(c));
  CUdeviceptr py = mem.Alloc(n * sizeof(float));
  CUmodule mod = nullptr;
  ASSERT_EQ(gpu->cu->cuModuleLoadData(&mod, k->cubin.data()), CUDA_SUCCESS);
  CUfunction fn = nullptr;
  ASSERT_EQ(gpu->cu->cuModuleGetFunction(&fn, mod, "kf_mul3_test"), CUDA_SUCCESS);
  void* args[] = {&pa, &pb, &pc, &py, const_cast<int*>(&n)};
  ASSERT_EQ(gpu->cu->cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS);
  std::vector<float> y(n);
  const std::string got = mem.Download(py, n * sizeof(float));
  std::memcpy(y.data(), got.data(), got.size());
  gpu->cu->cuModuleUnload(mod);
  int64_t eager_over = 0;
  for (int i = 0; i < n; ++i) {
    const volatile float ab = a[i] * b[i];
    const float plain = ab * c[i];
    const double exact = static_cast<double>(a[i]) * b[i] * c[i];  // a * b exact in double.
    const std::string what = absl::StrCat(a[i], " * ", b[i], " * ", c[i], " = ", y[i]);
    if (!std::isfinite(plain)) {
      if (std::isnan(plain)) {
        EXPECT_TRUE(std::isnan(y[i])) << what;
      } else {
        EXPECT_EQ(y[i], plain) << what;
      }
      continue;
    }
    // Half an ulp of the result, subnormals' ulp at least; the double
    // product's own rounding is 2^-53 of it.
    const double ulp = std::max(std::ldexp(1.0, std::ilogb(std::max(std::fabs(exact), 1e-38)) - 23),
                                std::ldexp(1.0, -149));
    const double bound = 0.5 * ulp * (1 + 1e-6);
    if (static_cast<size_t>(i) < n_special) {
      // Where a * b leaves float's range, no worse than the plain product.
      EXPECT_LE(std::fabs(y[i] - exact), std::max(bound, std::fabs(plain - exact))) << what;
    } else {
      EXPECT_LE(std::fabs(y[i] - exact), bound) << what;
      if (std::fabs(plain - exact) > bound) ++eager_over;
    }
  }
  // The test can tell: two roundings miss half an ulp often.
  EXPECT_GT(eager_over, 1000);
}

}  // namespace
}  // namespace kfuse
