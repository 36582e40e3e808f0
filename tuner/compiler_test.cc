// Tests for the compile-request checks and NvrtcCompiler. No GPU needed:
// NVRTC compiles for any named target.
#include "tuner/compiler.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

KernelSpec Spec(std::string entry, std::string source) {
  KernelSpec s;
  s.entry = std::move(entry);
  s.source = std::move(source);
  return s;
}

// Header-free, uses shared memory so static smem is non-zero.
KernelSpec TinySpec(const std::string& entry = "kfuse_tiny") {
  return Spec(
      entry,
      absl::StrCat("extern \"C\" __global__ void ", entry,
                   "(float* o, const float* a, int n) {\n"
                   "  __shared__ float s[96];\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  s[threadIdx.x % 96] = i < n ? a[i] : 0.f;\n"
                   "  __syncthreads();\n"
                   "  if (i < n) o[i] = s[(threadIdx.x + 1) % 96] * 2.f;\n"
                   "}\n"));
}

// About ten element-wise ops on float4, the shape the pointwise family emits.
KernelSpec Float4Spec(
    const std::string& entry,
    const std::string& launch_bounds = "__launch_bounds__(256)") {
  std::string body;
  for (const char* f : {"x", "y", "z", "w"}) {
    body += absl::StrCat("    { float t = x.", f, " * y.", f, " + z.", f,
                         "; t = fmaxf(t, 0.f);\n",
                         "      t = __expf(-t * t) * 0x1p-1f + __sinf(x.", f,
                         "); t = tanhf(t);\n",
                         "      t = t * (1.f / (1.f + __expf(-y.", f,
                         "))) - fabsf(x.", f, ") + 0x1.99999ap-4f * y.", f,
                         ";\n", "      r.", f, " = t; }\n");
  }
  return Spec(
      entry,
      absl::StrCat("extern \"C\" __global__ void ", launch_bounds, " ", entry,
                   "(float4* __restrict__ o, const float4* __restrict__ a,\n"
                   "  const float4* __restrict__ b, const float4* __restrict__ "
                   "c, long n) {\n"
                   "  for (long i = blockIdx.x * 256L + threadIdx.x; i < n;\n"
                   "       i += (long)gridDim.x * 256L) {\n"
                   "    float4 x = a[i], y = b[i], z = c[i], r;\n",
                   body,
                   "    o[i] = r;\n"
                   "  }\n"
                   "}\n"));
}

// --- Request validation (no NVRTC) ---------------------------------------

struct BadRequestCase {
  const char* name;
  std::string entry;
  std::string source;
  std::string arch;
  int max_registers;
  const char* message;
};

TEST(ValidateCompileRequestTest, RejectsBadInput) {
  const std::string src = "extern \"C\" __global__ void k() {}";
  const std::vector<BadRequestCase> cases = {
      {"empty entry", "", src, "sm_90", 0, "entry name"},
      {"leading digit", "1k", src, "sm_90", 0, "entry name"},
      {"space", "k k", src, "sm_90", 0, "entry name"},
      {"injection", "k(){}//", src, "sm_90", 0, "entry name"},
      {"65 chars", std::string(65, 'k'), src, "sm_90", 0, "entry name"},
      {"unknown arch", "k", src, "sm_91", 0, "not a known target"},
      {"option in arch", "k", src, "sm_90 -G", 0, "not a known target"},
      {"compute arch", "k", src, "compute_90", 0, "not a known target"},
      {"empty arch", "k", src, "", 0, "not a known target"},
      {"regs too low", "k", src, "sm_90", 8, "max_registers"},
      {"regs too high", "k", src, "sm_90", 256, "max_registers"},
      {"empty source", "k", "", "sm_90", 0, "source is empty"},
      {"NUL in source", "k", std::string("a\0b", 3), "sm_90", 0, "NUL"},
  };
  for (const BadRequestCase& c : cases) {
    SCOPED_TRACE(c.name);
    CompileOptions opts;
    opts.arch = c.arch;
    opts.max_registers = c.max_registers;
    absl::Status s = ValidateCompileRequest(Spec(c.entry, c.source), opts);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

TEST(ValidateCompileRequestTest, AcceptsGoodInput) {
  for (const char* entry : {"k", "_k", "kfuse_pw_0123", "K9"}) {
    EXPECT_TRUE(ValidateEntryName(entry).ok()) << entry;
  }
  EXPECT_TRUE(ValidateEntryName(std::string(64, 'k')).ok());
  for (const std::string& arch : KnownArchs()) {
    EXPECT_TRUE(ValidateArch(arch).ok()) << arch;
  }
  CompileOptions opts;
  opts.max_registers = 255;
  EXPECT_TRUE(ValidateCompileRequest(TinySpec(), opts).ok());
}

TEST(NvrtcOptionsTest, FixedServerOwnedList) {
  CompileOptions opts;
  opts.arch = "sm_90a";
  EXPECT_THAT(NvrtcOptions(opts),
              ::testing::ElementsAre("--gpu-architecture=sm_90a", "--std=c++17",
                                     "--ptxas-options=-v"));
  opts.line_info = true;
  opts.max_registers = 128;
  EXPECT_THAT(NvrtcOptions(opts),
              ::testing::ElementsAre("--gpu-architecture=sm_90a", "--std=c++17",
                                     "--ptxas-options=-v", "-lineinfo",
                                     "--maxrregcount=128"));
}

// --- ptxas log parsing -----------------------------------------------------

TEST(ParsePtxasResourcesTest, Nvrtc13Format) {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Function properties for helper\n"
      "ptxas         .     64 bytes stack frame, 0 bytes spill stores, 0 bytes "
      "spill loads\n"
      "ptxas info    : Compiling entry function 'other' for 'sm_80'\n"
      "ptxas info    : Function properties for other\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes "
      "spill loads\n"
      "ptxas info    : Used 99 registers, used 0 barriers, 1 bytes smem\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 "
      "bytes spill loads\n"
      "ptxas info    : Used 16 registers, used 1 barriers, 384 bytes smem, 372 "
      "bytes cmem[0]\n"
      "ptxas info    : Compile time = 2.775 ms\n";
  std::optional<Resources> r = ParsePtxasResources(log, "k");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->registers, 16u);
  EXPECT_EQ(r->static_smem_bytes, 384u);
  EXPECT_EQ(r->local_bytes, 24u);
  EXPECT_EQ(r->spill_bytes, 20u);
  EXPECT_FALSE(ParsePtxasResources(log, "missing").has_value());
  EXPECT_FALSE(ParsePtxasResources("", "k").has_value());
}

// --- NvrtcCompiler -----------------------------------------------------------

TEST(NvrtcCompilerTest, VersionAndSupportedArchs) {
  NvrtcCompiler nvrtc;
  EXPECT_THAT(nvrtc.Version(),
              ::testing::MatchesRegex("nvrtc-[0-9]+\\.[0-9]+"));
  EXPECT_EQ(nvrtc.Version(), NvrtcVersionString());
  std::vector<std::string> archs = SupportedArchs();
  std::printf("[ info ] %s supports:", nvrtc.Version().c_str());
  for (const std::string& a : archs) std::printf(" %s", a.c_str());
  std::printf("\n");
  for (const char* want : {"sm_80", "sm_90", "sm_90a", "sm_100"}) {
    EXPECT_THAT(archs, ::testing::Contains(want));
  }
}

TEST(NvrtcCompilerTest, CompilesForEachTarget) {
  NvrtcCompiler nvrtc;
  for (const char* arch : {"sm_80", "sm_90", "sm_90a", "sm_100"}) {
    SCOPED_TRACE(arch);
    CompileOptions opts;
    opts.arch = arch;
    absl::StatusOr<CompiledKernel> k = nvrtc.Compile(TinySpec(), opts);
    ASSERT_TRUE(k.ok()) << k.status();
    ASSERT_GE(k->cubin.size(), 4u);
    EXPECT_EQ(k->cubin.substr(0, 4),
              "\x7f"
              "ELF");
    EXPECT_THAT(k->ptx, HasSubstr(".entry kfuse_tiny("));
    EXPECT_THAT(k->ptx, HasSubstr(absl::StrCat(".target ", arch)));
    EXPECT_GT(k->resources.registers, 0u);
    EXPECT_EQ(k->resources.static_smem_bytes, 96u * 4);
    EXPECT_EQ(k->arch, arch);
    EXPECT_EQ(k->spec.entry, "kfuse_tiny");
    EXPECT_GT(k->compile_seconds, 0);
    EXPECT_THAT(k->log, HasSubstr("Used "));
  }
}

TEST(NvrtcCompilerTest, EverySupportedArchCompiles) {
  NvrtcCompiler nvrtc;
  for (const std::string& arch : SupportedArchs()) {
    CompileOptions opts;
    opts.arch = arch;
    opts.want_ptx = false;
    absl::StatusOr<CompiledKernel> k = nvrtc.Compile(TinySpec(), opts);
    EXPECT_TRUE(k.ok()) << arch << ": " << k.status();
    if (k.ok()) {
      EXPECT_TRUE(k->ptx.empty());
    }
  }
}

TEST(NvrtcCompilerTest, OptionsReachNvrtc) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.line_info = true;
  opts.max_registers = 32;  // Ignored by ptxas under __launch_bounds__.
  absl::StatusOr<CompiledKernel> k =
      nvrtc.Compile(Float4Spec("kf_f4", ""), opts);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_LE(k->resources.registers, 32u) << k->log;
  EXPECT_THAT(k->ptx, HasSubstr(".loc"));  // Line info.
}

TEST(NvrtcCompilerTest, SyntaxErrorIsInternalWithLog) {
  NvrtcCompiler nvrtc;
  absl::StatusOr<CompiledKernel> k = nvrtc.Compile(
      Spec("kbad", "extern \"C\" __global__ void kbad() { int x = ; }"), {});
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInternal) << k.status();
  EXPECT_THAT(std::string(k.status().message()),
              HasSubstr("kbad.cu(1): error: expected an expression"));
}

TEST(NvrtcCompilerTest, LongLogIsTruncated) {
  std::string src;
  for (int i = 0; i < 200; ++i) {
    src += absl::StrCat("__device__ int f", i, "() { return undefined_", i,
                        "; }\n");
  }
  NvrtcCompiler nvrtc;
  absl::StatusOr<CompiledKernel> k = nvrtc.Compile(Spec("k", src), {});
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInternal);
  EXPECT_LT(k.status().message().size(), 4096u + 256);
  EXPECT_THAT(std::string(k.status().message()),
              HasSubstr("more bytes of log"));
}

TEST(NvrtcCompilerTest, MissingEntryIsInternal) {
  NvrtcCompiler nvrtc;
  // Mangled (no extern "C"): the runner could not find it by name.
  absl::StatusOr<CompiledKernel> k =
      nvrtc.Compile(Spec("k", "__global__ void k(float* o) { *o = 1.f; }"), {});
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInternal) << k.status();
  EXPECT_THAT(std::string(k.status().message()), HasSubstr("no extern \"C\""));
}

TEST(NvrtcCompilerTest, BadRequestRejectedBeforeNvrtc) {
  NvrtcCompiler nvrtc;
  CompileOptions bad_arch;
  bad_arch.arch = "sm_90 --use_fast_math";
  EXPECT_EQ(nvrtc.Compile(TinySpec(), bad_arch).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The source would not compile either; InvalidArgument shows the entry
  // check ran first.
  EXPECT_EQ(nvrtc.Compile(Spec("bad name", "not C++"), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NvrtcCompilerTest, CancelledBeforeStart) {
  NvrtcCompiler nvrtc;
  std::atomic<bool> cancel{true};
  absl::StatusOr<CompiledKernel> k = nvrtc.Compile(TinySpec(), {}, &cancel);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kCancelled) << k.status();
  cancel = false;
  EXPECT_TRUE(nvrtc.Compile(TinySpec(), {}, &cancel).ok());
}

TEST(NvrtcCompilerTest, WgmmaNeedsSm90a) {
  KernelSpec spec =
      Spec("kf_wgmma",
           "extern \"C\" __global__ void kf_wgmma() {\n"
           "  asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n"
           "}\n");
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90a";
  absl::StatusOr<CompiledKernel> k = nvrtc.Compile(spec, opts);
  EXPECT_TRUE(k.ok()) << k.status();
  opts.arch = "sm_90";
  k = nvrtc.Compile(spec, opts);
  ASSERT_EQ(k.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(k.status().message()),
              HasSubstr("not supported on .target 'sm_90'"));
}

// Prints timings for the report; asserts only that compiles succeed.
TEST(NvrtcCompilerTest, WarmFloat4CompileTime) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;  // sm_90
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<CompiledKernel> k =
        nvrtc.Compile(Float4Spec(absl::StrCat("kf_f4_", i)), opts);
    ASSERT_TRUE(k.ok()) << k.status();
    std::printf(
        "[ info ] float4 10-op kernel, %s, compile %d: %.1f ms, %u regs\n",
        opts.arch.c_str(), i, k->compile_seconds * 1e3, k->resources.registers);
  }
}

// NVRTC's memory is bounded by how many programs compile at once: six
// threads under a limit of two never have more than two in NVRTC, and all
// compile; a source over the size limit never reaches NVRTC.
TEST(NvrtcCompilerTest, ConcurrentCompilesAreBounded) {
  SetMaxConcurrentCompiles(2);
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      if (nvrtc.Compile(Float4Spec(absl::StrCat("kf_gate_", i)), opts).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  const int peak = PeakConcurrentCompiles();
  SetMaxConcurrentCompiles(kDefaultMaxConcurrentCompiles);
  EXPECT_EQ(ok.load(), 6);
  EXPECT_GE(peak, 1);
  EXPECT_LE(peak, 2);

  KernelSpec huge = TinySpec("kf_huge");
  huge.source += std::string(size_t{5} << 20, ' ');
  absl::StatusOr<CompiledKernel> k = nvrtc.Compile(huge, opts);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(k.status().message()), HasSubstr("exceeds the compiler's limit"));
}

}  // namespace
}  // namespace kfuse
