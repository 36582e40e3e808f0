// The launcher's GPU-free half: expression evaluation, symbol binding, buffer
// checks and precondition refusals. The GPU half runs in
// tests/gpu_chains_test.cc.
#include "clients/launcher.h"

#include <string>
#include <vector>

#include "clients/launch_config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

v1::KernelPlan Parse(const std::string& text) {
  v1::KernelPlan plan;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &plan)) << text;
  return plan;
}

v1::Expr ParseExpr(const std::string& text) {
  v1::Expr e;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &e)) << text;
  return e;
}

// y[N] = f(a[N], b[N]) with a 16-byte alignment precondition on a and a
// 32-bit index range on N: the shape every pointwise plan has.
constexpr char kPlan[] = R"pb(
  symbols {
    name: "N"
    sources { input: 0 axis: 0 }
    sources { input: 1 axis: 0 }
  }
  inputs {
    name: "a"
    dtype: DTYPE_F32
    shape { symbol: "N" }
  }
  inputs {
    name: "b"
    dtype: DTYPE_F32
    shape { symbol: "N" }
  }
  outputs {
    name: "y"
    dtype: DTYPE_F32
    shape { symbol: "N" }
  }
  kernels {
    entry: "kf_pw"
    params {
      kind: KIND_BUFFER
      buffer { input: 0 }
    }
    params {
      kind: KIND_BUFFER
      buffer { input: 1 }
    }
    params {
      kind: KIND_BUFFER
      buffer { output: 0 }
    }
    params {
      kind: KIND_SCALAR
      value { symbol: 0 }
      scalar_dtype: DTYPE_I64
    }
    params {
      kind: KIND_SCALAR
      value {
        binary {
          op: OP_MUL
          lhs { symbol: 0 }
          rhs { constant: 2 }
        }
      }
      scalar_dtype: DTYPE_I32
    }
    grid {
      x {
        binary {
          op: OP_CEIL_DIV
          lhs { symbol: 0 }
          rhs { constant: 1024 }
        }
      }
    }
    block { x { constant: 256 } }
    preconditions {
      kind: KIND_ALIGNED
      buffer { input: 0 }
      value: 16
      description: "input 0 is 16-byte aligned (vector loads)"
    }
    preconditions {
      kind: KIND_AT_MOST
      expr { symbol: 0 }
      value: 1000000000
      description: "N <= 1e9 (32-bit indexing)"
    }
  }
)pb";

DeviceBuffer F32(CUdeviceptr p, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
  return DeviceBuffer{p, std::move(shape), std::move(strides), DType::kF32};
}

TEST(EvalExprTest, Table) {
  struct Case {
    std::string expr;
    std::vector<int64_t> symbols;
    int64_t want;
  };
  const Case cases[] = {
      {"constant: 7", {}, 7},
      {"symbol: 1", {3, 9}, 9},
      {"binary { op: OP_CEIL_DIV lhs { symbol: 0 } rhs { constant: 256 } }", {1000003}, 3907},
      {"binary { op: OP_CEIL_DIV lhs { constant: 0 } rhs { constant: 256 } }", {}, 0},
      {"binary { op: OP_SUB lhs { constant: 2 } rhs { constant: 5 } }", {}, -3},
      {"binary { op: OP_MIN lhs { symbol: 0 } rhs { constant: 5 } }", {9}, 5},
      {"binary { op: OP_MAX lhs { symbol: 0 } rhs { constant: 5 } }", {9}, 9},
      {"binary { op: OP_ADD lhs { binary { op: OP_MUL lhs { symbol: 0 } rhs { symbol: 1 } } } "
       "rhs { constant: 1 } }",
       {6, 7},
       43},
  };
  for (const Case& c : cases) {
    absl::StatusOr<int64_t> v = EvalExpr(ParseExpr(c.expr), c.symbols);
    ASSERT_TRUE(v.ok()) << c.expr << ": " << v.status();
    EXPECT_EQ(*v, c.want) << c.expr;
  }
}

TEST(EvalExprTest, Errors) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty"},
      {"symbol: 2", "symbol 2"},
      {"binary { op: OP_CEIL_DIV lhs { constant: 1 } rhs { constant: 0 } }", "ceil_div by 0"},
      {"binary { op: OP_MUL lhs { constant: 9223372036854775807 } rhs { constant: 2 } }",
       "overflows"},
      {"binary { lhs { constant: 1 } rhs { constant: 2 } }", "unknown op"},
  };
  for (const auto& [text, msg] : cases) {
    absl::StatusOr<int64_t> v = EvalExpr(ParseExpr(text), {1});
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(v.status().message(), HasSubstr(msg)) << text;
  }
}

TEST(EvalExprTest, RefusesDeepTrees) {
  v1::Expr e;
  e.set_constant(1);
  for (int i = 0; i < 100; ++i) {
    v1::Expr outer;
    outer.mutable_binary()->set_op(v1::Expr::OP_ADD);
    *outer.mutable_binary()->mutable_lhs() = e;
    outer.mutable_binary()->mutable_rhs()->set_constant(1);
    e = outer;
  }
  EXPECT_THAT(EvalExpr(e, {}).status().message(), HasSubstr("deeper"));
}

TEST(ResolveLaunchTest, EvaluatesGridBlockAndParams) {
  v1::KernelPlan plan = Parse(kPlan);
  std::vector<DeviceBuffer> in = {F32(0x1000, {1000003}), F32(0x2000, {1000003})};
  std::vector<DeviceBuffer> out = {F32(0x3000, {1000003})};
  absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(plan, in, out);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->symbols, std::vector<int64_t>{1000003});
  ASSERT_EQ(cfg->kernels.size(), 1u);
  const KernelLaunch& k = cfg->kernels[0];
  EXPECT_EQ(k.grid[0], 977u);
  EXPECT_EQ(k.grid[1], 1u);
  EXPECT_EQ(k.block[0], 256u);
  EXPECT_EQ(k.cluster[0], 0u);
  EXPECT_FALSE(k.empty);
  ASSERT_EQ(k.params.size(), 5u);
  EXPECT_EQ(k.params[2].buffer.kind, BufferKind::kOutput);
  EXPECT_EQ(k.params[3].scalar, 1000003);
  EXPECT_EQ(k.params[3].scalar_dtype, DType::kI64);
  EXPECT_EQ(k.params[4].scalar, 2000006);
  EXPECT_EQ(k.params[4].scalar_dtype, DType::kI32);
}

TEST(ResolveLaunchTest, ZeroElementsLaunchNothing) {
  v1::KernelPlan plan = Parse(kPlan);
  std::vector<DeviceBuffer> in = {F32(0x1000, {0}), F32(0x2000, {0})};
  std::vector<DeviceBuffer> out = {F32(0x3000, {0})};
  absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(plan, in, out);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->kernels[0].empty);
}

TEST(BindSymbolsTest, ConflictNamesBothSources) {
  v1::KernelPlan plan = Parse(kPlan);
  std::vector<DeviceBuffer> in = {F32(0x1000, {1000}), F32(0x2000, {999})};
  absl::StatusOr<std::vector<int64_t>> s = BindSymbols(plan, in);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      s.status().message(),
      HasSubstr("symbol 'N' is 1000 from input 0 ('a') axis 0 but 999 from input 1 ('b') axis 0"));
}

TEST(BindSymbolsTest, NegativeOrHugeSizesAreRefusedNamingTheInput) {
  v1::KernelPlan plan = Parse(kPlan);
  std::vector<DeviceBuffer> in = {F32(0x1000, {-1}), F32(0x2000, {-1})};
  std::vector<DeviceBuffer> out = {F32(0x3000, {-1})};
  absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(plan, in, out);
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cfg.status().message(),
              HasSubstr("input 0 ('a') axis 0 has size -1; sizes must not be negative"));
  in = {F32(0x1000, {int64_t{1} << 62}), F32(0x2000, {int64_t{1} << 62})};
  EXPECT_THAT(BindSymbols(plan, in).status().message(),
              HasSubstr("input 0 ('a') has more elements than a launch can address"));
}

TEST(ResolveLaunchTest, NegativeIntermediateSizeIsRefused) {
  v1::KernelPlan plan = Parse(kPlan);
  v1::Intermediate* im = plan.add_intermediates();
  im->set_dtype(v1::DTYPE_F32);
  im->mutable_bytes()->set_constant(-8);
  std::vector<DeviceBuffer> in = {F32(0x1000, {1000}), F32(0x2000, {1000})};
  std::vector<DeviceBuffer> out = {F32(0x3000, {1000})};
  EXPECT_THAT(ResolveLaunch(plan, in, out).status().message(),
              HasSubstr("plan intermediate size is negative"));
}

TEST(BindSymbolsTest, SourceOutOfRange) {
  v1::KernelPlan plan = Parse(R"pb(
    symbols {
      name: "M"
      sources { input: 0 axis: 3 }
    }
    inputs {
      name: "a"
      dtype: DTYPE_F32
      shape { symbol: "M" }
    })pb");
  std::vector<DeviceBuffer> in = {F32(0x1000, {4})};
  EXPECT_THAT(BindSymbols(plan, in).status().message(), HasSubstr("axis 3"));
}

// Buffers that do not match the plan: InvalidArgument naming the tensor.
TEST(ResolveLaunchTest, RejectsMismatchedBuffers) {
  struct Case {
    std::string name;
    std::vector<DeviceBuffer> in, out;
    std::string msg;
  };
  const Case cases[] = {
      {"input count", {F32(0x1000, {8})}, {F32(0x3000, {8})}, "plan has 2 inputs; got 1"},
      {"output count", {F32(0x1000, {8}), F32(0x2000, {8})}, {}, "plan has 1 outputs; got 0"},
      {"dtype",
       {F32(0x1000, {8}), DeviceBuffer{0x2000, {8}, {}, DType::kBF16}},
       {F32(0x3000, {8})},
       "input 1 ('b') must be f32; got bf16"},
      {"rank",
       {F32(0x1000, {8}), F32(0x2000, {8})},
       {F32(0x3000, {8, 1})},
       "output 0 ('y') must have rank 1"},
      {"output shape",
       {F32(0x1000, {8}), F32(0x2000, {8})},
       {F32(0x3000, {9})},
       "output 0 ('y') must have shape [8]; got [9]"},
      {"strides",
       {F32(0x1000, {8}, {2}), F32(0x2000, {8})},
       {F32(0x3000, {8})},
       "input 0 ('a') must have strides [1]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(Parse(kPlan), c.in, c.out);
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(cfg.status().message(), HasSubstr(c.msg)) << c.name;
  }
}

TEST(ResolveLaunchTest, StridesOfUnitDimsDoNotMatter) {
  v1::KernelPlan plan = Parse(R"pb(
    inputs {
      name: "a"
      dtype: DTYPE_F32
      shape { size: 4 }
      shape { size: 1 }
    }
    outputs {
      name: "y"
      dtype: DTYPE_F32
      shape { size: 4 }
      shape { size: 1 }
    })pb");
  std::vector<DeviceBuffer> in = {F32(0x1000, {4, 1}, {1, 77})};
  std::vector<DeviceBuffer> out = {F32(0x3000, {4, 1})};
  EXPECT_TRUE(ResolveLaunch(plan, in, out).ok());
}

// A broken precondition refuses the launch with the precondition's text.
TEST(ResolveLaunchTest, RefusesBrokenPreconditions) {
  struct Case {
    std::string name;
    std::string extra;  // An extra precondition on the plan, or "".
    CUdeviceptr a_ptr;
    int64_t n;
    std::vector<int64_t> a_strides;
    std::string msg;
  };
  const Case cases[] = {
      {"misaligned",
       "",
       0x1004,
       64,
       {},
       "launch refused: kernel 0 requires input 0 is 16-byte aligned (vector loads) (address "
       "0x1004"},
      {"too large",
       "",
       0x1000,
       1000000001,
       {},
       "requires N <= 1e9 (32-bit indexing) (1000000001 > 1000000000)"},
      {"not divisible",
       R"pb(kind: KIND_DIVISIBLE
            expr { symbol: 0 }
            value: 4
            description: "N % 4 == 0")pb",
       0x1000,
       66,
       {},
       "requires N % 4 == 0 (66 is not a multiple of 4)"},
      {"too small",
       R"pb(kind: KIND_AT_LEAST
            expr { symbol: 0 }
            value: 128
            description: "N >= 128")pb",
       0x1000,
       64,
       {},
       "requires N >= 128 (64 < 128)"},
  };
  for (const Case& c : cases) {
    v1::KernelPlan plan = Parse(kPlan);
    if (!c.extra.empty()) {
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
          c.extra, plan.mutable_kernels(0)->add_preconditions()));
    }
    std::vector<DeviceBuffer> in = {F32(c.a_ptr, {c.n}, c.a_strides), F32(0x2000, {c.n})};
    std::vector<DeviceBuffer> out = {F32(0x3000, {c.n})};
    absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(plan, in, out);
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kFailedPrecondition) << c.name;
    EXPECT_THAT(cfg.status().message(), HasSubstr(c.msg)) << c.name;
  }
}

TEST(ResolveLaunchTest, ContiguityPrecondition) {
  // A plan that declares a strided input but whose kernel needs it dense.
  v1::KernelPlan plan = Parse(R"pb(
    inputs {
      name: "a"
      dtype: DTYPE_F32
      shape { size: 4 }
      shape { size: 4 }
      strides: 8
      strides: 1
    }
    outputs {
      name: "y"
      dtype: DTYPE_F32
      shape { size: 4 }
      shape { size: 4 }
    }
    kernels {
      entry: "k"
      preconditions {
        kind: KIND_CONTIGUOUS
        buffer { input: 0 }
        description: "input 0 is dense"
      }
    })pb");
  std::vector<DeviceBuffer> in = {F32(0x1000, {4, 4}, {8, 1})};
  std::vector<DeviceBuffer> out = {F32(0x3000, {4, 4})};
  absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(plan, in, out);
  EXPECT_EQ(cfg.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cfg.status().message(), HasSubstr("input 0 is dense (strides [8,1] are not dense"));
}

TEST(ResolveLaunchTest, UnknownPreconditionKindIsRefused) {
  v1::KernelPlan plan = Parse(kPlan);
  plan.mutable_kernels(0)->add_preconditions()->set_kind(static_cast<v1::Precondition::Kind>(99));
  std::vector<DeviceBuffer> in = {F32(0x1000, {8}), F32(0x2000, {8})};
  std::vector<DeviceBuffer> out = {F32(0x3000, {8})};
  EXPECT_THAT(ResolveLaunch(plan, in, out).status().message(), HasSubstr("unknown kind 99"));
}

TEST(ResolveLaunchTest, RejectsBadLaunchShapes) {
  const std::pair<std::string, std::string> cases[] = {
      {R"pb(kernels {
              entry: "k"
              block { x { constant: 2048 } }
            })pb",
       "outside [0, 1024]"},
      {R"pb(kernels {
              entry: "k"
              block {
                x { constant: 512 }
                y { constant: 4 }
              }
            })pb",
       "2048 threads"},
      {R"pb(kernels {
              entry: "k"
              grid { y { constant: 70000 } }
            })pb",
       "grid dim 1 is 70000"},
      {R"pb(kernels {
              entry: "k"
              params {
                kind: KIND_BUFFER
                buffer { input: 3 }
              }
            })pb",
       "missing buffer"},
      {R"pb(kernels {
              entry: "k"
              params {
                kind: KIND_SCALAR
                value { constant: 4294967296 }
                scalar_dtype: DTYPE_I32
              }
            })pb",
       "32-bit"},
  };
  for (const auto& [text, msg] : cases) {
    absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(Parse(text), {}, {});
    EXPECT_EQ(cfg.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(cfg.status().message(), HasSubstr(msg)) << text;
  }
}

TEST(ResolveLaunchTest, TensorMapAndWorkspaceAndCluster) {
  v1::KernelPlan plan = Parse(R"pb(
    symbols {
      name: "M"
      sources { input: 0 axis: 0 }
    }
    inputs {
      name: "a"
      dtype: DTYPE_BF16
      shape { symbol: "M" }
      shape { size: 64 }
    }
    intermediates {
      dtype: DTYPE_F32
      shape { symbol: 0 }
    }
    kernels {
      entry: "k"
      params {
        kind: KIND_TENSOR_MAP
        tensor_map {
          buffer { input: 0 }
          dtype: DTYPE_BF16
          global_dims { constant: 64 }
          global_dims { symbol: 0 }
          global_strides { constant: 128 }
          box_dims: 64
          box_dims: 32
          swizzle: SWIZZLE_128B
        }
      }
      params {
        kind: KIND_WORKSPACE
        workspace_bytes {
          binary {
            op: OP_MUL
            lhs { symbol: 0 }
            rhs { constant: 4 }
          }
        }
        workspace_zeroed: true
      }
      params {
        kind: KIND_BUFFER
        buffer { intermediate: 0 }
      }
      cluster { x { constant: 2 } }
    })pb");
  std::vector<DeviceBuffer> in = {DeviceBuffer{0x1000, {100, 64}, {}, DType::kBF16}};
  absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(plan, in, {});
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->intermediate_bytes, std::vector<int64_t>{400});
  const KernelLaunch& k = cfg->kernels[0];
  EXPECT_EQ(k.cluster[0], 2u);
  EXPECT_EQ(k.cluster[1], 1u);
  EXPECT_EQ(k.params[0].map_dims, (std::vector<uint64_t>{64, 100}));
  EXPECT_EQ(k.params[0].map_strides, std::vector<uint64_t>{128});
  EXPECT_EQ(k.params[1].workspace_bytes, 400);
  EXPECT_TRUE(k.params[1].workspace_zeroed);
  EXPECT_EQ(k.params[2].buffer.kind, BufferKind::kIntermediate);
}

TEST(DenseStridesTest, RowMajor) {
  EXPECT_EQ(DenseStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_TRUE(DenseStrides({}).empty());
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// A pinned key refuses an unsigned or re-signed plan before any driver call:
// the driver table here is all null, so a call would crash the test.
TEST(LauncherPinnedKeyTest, UnverifiedPlansAreRefusedBeforeTheDriver) {
  DriverApi no_driver{};
  std::array<uint8_t, 32> seed_a{}, seed_b{};
  seed_a.fill(1);
  seed_b.fill(2);
  SigningKey server = SigningKeyFromSeed(seed_a);
  SigningKey other = SigningKeyFromSeed(seed_b);
  Launcher launcher(no_driver, {}, server.public_key);

  v1::KernelPlan plan;
  plan.set_key("k");
  plan.add_kernels()->set_cubin("\x7f" "ELF");
  absl::StatusOr<PreparedPlan> unsigned_plan = launcher.Prepare(plan);
  EXPECT_EQ(unsigned_plan.status().code(), absl::StatusCode::kPermissionDenied);

  SignPlan(other, &plan);
  absl::StatusOr<PreparedPlan> wrong_key = launcher.Prepare(plan);
  EXPECT_EQ(wrong_key.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(launcher.cached_modules(), 0);
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// What the fake driver below saw. Its entries are plain functions (the
// table holds function pointers), so they record here.
struct FakeDriverLog {
  int device = 0;  // The current context's device.
  std::vector<int> pools_made;  // Each pool's device.
  std::vector<cuuint64_t> thresholds;
  std::vector<uintptr_t> allocs_from, freed, destroyed;  // Pool handles; pointers.
  int launches = 0;
};
FakeDriverLog* fake_log = nullptr;

CUmemoryPool PoolHandle(int i) { return reinterpret_cast<CUmemoryPool>(uintptr_t{0x500} + i); }

DriverApi ScratchDriver() {
  DriverApi api{};
  api.cuCtxGetCurrent = [](CUcontext* c) {
    *c = reinterpret_cast<CUcontext>(uintptr_t{0x10} + fake_log->device);
    return CUDA_SUCCESS;
  };
  api.cuCtxGetDevice = [](CUdevice* d) {
    *d = fake_log->device;
    return CUDA_SUCCESS;
  };
  api.cuModuleLoadData = [](CUmodule* m, const void*) {
    *m = reinterpret_cast<CUmodule>(uintptr_t{0x20});
    return CUDA_SUCCESS;
  };
  api.cuModuleUnload = [](CUmodule) { return CUDA_SUCCESS; };
  api.cuModuleGetFunction = [](CUfunction* f, CUmodule, const char*) {
    *f = reinterpret_cast<CUfunction>(uintptr_t{0x30});
    return CUDA_SUCCESS;
  };
  api.cuMemPoolCreate = [](CUmemoryPool* p, const CUmemPoolProps* props) {
    EXPECT_EQ(props->location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    fake_log->pools_made.push_back(props->location.id);
    *p = PoolHandle(static_cast<int>(fake_log->pools_made.size()));
    return CUDA_SUCCESS;
  };
  api.cuMemPoolSetAttribute = [](CUmemoryPool, CUmemPool_attribute attr, void* value) {
    EXPECT_EQ(attr, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
    fake_log->thresholds.push_back(*static_cast<cuuint64_t*>(value));
    return CUDA_SUCCESS;
  };
  api.cuMemPoolDestroy = [](CUmemoryPool p) {
    fake_log->destroyed.push_back(reinterpret_cast<uintptr_t>(p));
    return CUDA_SUCCESS;
  };
  api.cuMemAllocFromPoolAsync = [](CUdeviceptr* d, size_t, CUmemoryPool p, CUstream) {
    fake_log->allocs_from.push_back(reinterpret_cast<uintptr_t>(p));
    *d = 0x100000 * fake_log->allocs_from.size();
    return CUDA_SUCCESS;
  };
  api.cuMemFreeAsync = [](CUdeviceptr d, CUstream) {
    fake_log->freed.push_back(d);
    return CUDA_SUCCESS;
  };
  api.cuMemsetD8Async = [](CUdeviceptr, unsigned char, size_t, CUstream) {
    return CUDA_SUCCESS;
  };
  api.cuLaunchKernel = [](CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, CUstream, void**, void**) {
    ++fake_log->launches;
    return CUDA_SUCCESS;
  };
  return api;
}

// Scratch comes from a pool the Launcher makes once a device and keeps
// reserved across synchronizes (the device's default pool, at threshold 0,
// hands its memory back at each and maps it anew at the next launch).
TEST(LauncherScratchTest, OnePoolADeviceKeptAcrossSynchronizes) {
  FakeDriverLog log;
  fake_log = &log;
  const DriverApi api = ScratchDriver();
  v1::KernelPlan plan = Parse(R"pb(
    symbols {
      name: "N"
      sources { input: 0 axis: 0 }
    }
    inputs {
      name: "a"
      dtype: DTYPE_F32
      shape { symbol: "N" }
    }
    intermediates {
      dtype: DTYPE_F32
      shape { symbol: 0 }
    }
    kernels {
      entry: "k"
      cubin: "\x7f" "ELF"
      params {
        kind: KIND_BUFFER
        buffer { intermediate: 0 }
      }
      params {
        kind: KIND_WORKSPACE
        workspace_bytes { constant: 512 }
        workspace_zeroed: true
      }
      grid { x { constant: 1 } }
      block { x { constant: 32 } }
    })pb");
  const std::vector<DeviceBuffer> in = {F32(0x1000, {64})};
  {
    Launcher launcher(api);
    for (int device : {0, 0, 1}) {
      log.device = device;
      ASSERT_TRUE(launcher.Launch(plan, in, {}, nullptr).ok());
    }
    EXPECT_EQ(log.pools_made, (std::vector<int>{0, 1}));
    EXPECT_EQ(log.thresholds, (std::vector<cuuint64_t>{~cuuint64_t{0}, ~cuuint64_t{0}}));
    const uintptr_t p0 = 0x501, p1 = 0x502;
    EXPECT_EQ(log.allocs_from, (std::vector<uintptr_t>{p0, p0, p0, p0, p1, p1}));
    EXPECT_EQ(log.freed.size(), 6u);  // Each launch's, behind its kernels.
    EXPECT_EQ(log.launches, 3);
    EXPECT_TRUE(log.destroyed.empty());
  }
  EXPECT_EQ(log.destroyed, (std::vector<uintptr_t>{0x501, 0x502}));
  fake_log = nullptr;
}

}  // namespace
}  // namespace kfuse
