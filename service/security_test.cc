// kfused's security hooks in process: tokens on every RPC, signed plans
// (misses and hits), and no client string reaching generated source, kernel
// entries or compiler options.
#include <chrono>
#include <mutex>

#include "gtest/gtest.h"
#include "plan/signing.h"
#include "service/auth.h"
#include "service/server.h"
#include "service/service_test_util.h"

namespace kfuse {
namespace {

constexpr char kToken[] = "test-token-0123456789";

// Records every KernelSpec and CompileOptions it is given.
class RecordingCompiler : public Compiler {
 public:
  absl::StatusOr<CompiledKernel> Compile(const KernelSpec& spec, const CompileOptions& opts,
                                         const std::atomic<bool>* cancel) override {
    std::lock_guard<std::mutex> lock(mu);
    specs.push_back(spec);
    options.push_back(opts);
    CompiledKernel k;
    k.spec = spec;
    k.arch = opts.arch;
    k.cubin = "\x7f" "ELF-fake";
    return k;
  }
  std::string Version() const override { return "fake-1"; }
  std::mutex mu;
  std::vector<KernelSpec> specs;
  std::vector<CompileOptions> options;
};

// relu(x * 2) over a symbolic dim, with the names given.
v1::CompileRequest Chain(const std::string& input, const std::string& symbol, const std::string& output) {
  v1::CompileRequest r;
  r.set_include_source(true);
  v1::TensorSpec* in = r.mutable_chain()->add_inputs();
  in->set_name(input);
  in->set_dtype(v1::DTYPE_F32);
  v1::Dim* d = in->add_shape();
  d->set_symbol(symbol);
  d->set_hint(4096);
  v1::Op* c = r.mutable_chain()->add_ops();
  c->set_kind(v1::OP_CONSTANT);
  c->set_value(2.0);
  v1::Op* mul = r.mutable_chain()->add_ops();
  mul->set_kind(v1::OP_MUL);
  mul->add_args()->set_input(0);
  mul->add_args()->set_op(0);
  v1::Op* relu = r.mutable_chain()->add_ops();
  relu->set_kind(v1::OP_RELU);
  relu->add_args()->set_op(1);
  v1::Output* out = r.mutable_chain()->add_outputs();
  out->set_name(output);
  out->mutable_value()->set_op(2);
  return r;
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions so;
    so.path = service_testing::TestStorePath();
    store_ = *Store::Open(so);
    PipelineDeps deps;
    deps.compiler = &compiler_;
    deps.store = store_.get();
    pipeline_ = std::make_unique<Pipeline>(std::move(deps), PipelineOptions{});
  }
  void Serve() {
    tokens_ = *TokenSet::FromText(kToken);
    std::array<uint8_t, 32> seed;
    seed.fill(7);
    key_ = SigningKeyFromSeed(seed);
    ServiceOptions opts;
    opts.tokens = &tokens_;
    opts.signing_key = &key_;
    service_ = std::make_unique<KernelServiceImpl>(pipeline_.get(), opts);
    server_ = std::make_unique<service_testing::LoopbackServer>(service_.get());
    stub_ = server_->stub();
  }
  void TearDown() override {
    server_.reset();
    if (service_) service_->Drain();
  }
  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& authorization) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
    return ctx;
  }

  RecordingCompiler compiler_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Pipeline> pipeline_;
  TokenSet tokens_;
  SigningKey key_;
  std::unique_ptr<KernelServiceImpl> service_;
  std::unique_ptr<service_testing::LoopbackServer> server_;
  v1::KernelService::Stub* stub_ = nullptr;  // server_'s.
};

TEST_F(SecurityTest, EveryRpcNeedsTheToken) {
  Serve();
  v1::CompileRequest req = Chain("x", "n", "y");
  for (const std::string auth : {"", "Bearer wrong-token-0123456789", "Basic test-token-0123456789"}) {
    v1::CompileResponse resp;
    EXPECT_EQ(stub_->Compile(Ctx(auth).get(), req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED) << auth;
    EXPECT_EQ(stub_->Lookup(Ctx(auth).get(), req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::DeviceInfo info;
    EXPECT_EQ(stub_->GetDeviceInfo(Ctx(auth).get(), {}, &info).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::ListKernelsResponse list;
    EXPECT_EQ(stub_->ListKernels(Ctx(auth).get(), {}, &list).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::DeleteKernelsRequest del;
    del.set_all(true);
    v1::DeleteKernelsResponse deleted;
    EXPECT_EQ(stub_->DeleteKernels(Ctx(auth).get(), del, &deleted).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    auto ctx = Ctx(auth);
    auto reader = stub_->Tune(ctx.get(), req);
    v1::TuneProgress progress;
    while (reader->Read(&progress)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_TRUE(compiler_.specs.empty()) << "an unauthenticated call reached the compiler";
}

TEST_F(SecurityTest, MissesAndHitsAreSigned) {
  Serve();
  const std::string auth = std::string("Bearer ") + kToken;
  v1::CompileRequest req = Chain("x", "n", "y");
  v1::CompileResponse miss, hit, looked_up;
  ASSERT_TRUE(stub_->Compile(Ctx(auth).get(), req, &miss).ok());
  EXPECT_EQ(miss.cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_TRUE(VerifyPlanSignature(miss.plan(), key_.public_key).ok());
  ASSERT_TRUE(stub_->Compile(Ctx(auth).get(), req, &hit).ok());
  EXPECT_EQ(hit.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_TRUE(VerifyPlanSignature(hit.plan(), key_.public_key).ok());
  ASSERT_TRUE(stub_->Lookup(Ctx(auth).get(), req, &looked_up).ok());
  EXPECT_TRUE(VerifyPlanSignature(looked_up.plan(), key_.public_key).ok());

  auto ctx = Ctx(auth);
  auto reader = stub_->Tune(ctx.get(), req);
  v1::TuneProgress progress, last;
  while (reader->Read(&progress)) last = progress;
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(VerifyPlanSignature(last.result().plan(), key_.public_key).ok());
}

// Every substring of `hostile` of at least 6 characters that `baseline`
// (the same chain's output under benign names) does not also contain.
std::vector<std::string> Leaks(const std::string& hostile, const std::string& text, const std::string& baseline) {
  std::vector<std::string> leaks;
  for (size_t i = 0; i + 6 <= hostile.size(); ++i) {
    std::string sub = hostile.substr(i, 6);
    if (text.find(sub) != std::string::npos && baseline.find(sub) == std::string::npos) leaks.push_back(sub);
  }
  return leaks;
}

std::string Everything(const RecordingCompiler& c, const v1::CompileResponse& r) {
  std::string all;
  for (const KernelSpec& s : c.specs) all += s.entry + "\n" + s.source + "\n" + s.partition_reason + "\n";
  for (const CompileOptions& o : c.options) all += o.arch + "\n";
  for (const v1::Kernel& k : r.plan().kernels()) all += k.entry() + "\n" + k.source() + "\n";
  return all;
}

TEST_F(SecurityTest, NoClientStringReachesSourceEntryOrCompilerOptions) {
  const std::string hostile[] = {
      "x\"; system(\"rm -rf /QQZ1\"); //",
      "a\n#include \"/etc/passwdQQZ2\"\n",
      "*/ __global__ void pwnQQZ3() { asm(\"trap;\"); } /*",
      "$(touch /tmp/pwnQQZ4) `id` ; | & > QQZ4",
      "\\\n#define float doubleQQZ5",
      std::string(1000, 'Q') + "Z6",
  };
  // The benign baseline: what the generator writes for plain names.
  ASSERT_TRUE(pipeline_->Prepare(Chain("x", "n", "y")).ok());
  absl::StatusOr<v1::CompileResponse> base = pipeline_->Build(*pipeline_->Prepare(Chain("x", "n", "y")), nullptr, nullptr);
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_FALSE(compiler_.specs.empty());
  const std::string baseline = Everything(compiler_, *base);
  const std::string baseline_source = compiler_.specs[0].source;

  int built = 0;
  for (size_t i = 0; i < std::size(hostile); ++i) {
    const std::string& h = hostile[i];
    for (int where = 0; where < 3; ++where) {
      v1::CompileRequest req = Chain(where == 0 ? h : "x", where == 1 ? h : "n", where == 2 ? h : "y");
      absl::StatusOr<Prepared> p = pipeline_->Prepare(req);
      if (!p.ok()) continue;  // Refusing a name is fine too.
      compiler_.specs.clear();
      compiler_.options.clear();
      absl::StatusOr<v1::CompileResponse> r = pipeline_->Build(*p, nullptr, nullptr);
      ASSERT_TRUE(r.ok()) << r.status();
      ++built;
      ASSERT_FALSE(compiler_.specs.empty()) << "case " << i << " field " << where;
      const std::string all = Everything(compiler_, *r);
      EXPECT_EQ(all.find(h), std::string::npos) << "case " << i << " field " << where;
      std::vector<std::string> leaks = Leaks(h, all, baseline);
      EXPECT_TRUE(leaks.empty()) << "case " << i << " field " << where << ": '" << leaks[0] << "'";
      EXPECT_EQ(compiler_.specs[0].source, baseline_source) << "names changed the generated source";
    }
  }
  // Input and output names are free text in the API: those cases must have
  // been compiled, not merely refused.
  EXPECT_GE(built, 2 * static_cast<int>(std::size(hostile)));
  std::printf("hostile-name chains compiled: %d of %d\n", built, 3 * static_cast<int>(std::size(hostile)));
}

}  // namespace
}  // namespace kfuse
