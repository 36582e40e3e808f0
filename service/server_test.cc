// The service in process, on loopback, with a fake compiler: one job per
// key, deadlines that end a wait and not the job, background jobs, errors.
#include "service/server.h"

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/service_test_util.h"

namespace kfuse {
namespace {

using service_testing::ColumnSoftmax;
using service_testing::ScaledActivation;
using service_testing::FakeCompiler;
using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::Not;

// y = -x ([64, 1024] f32), then `n` times y = y - max(y, axis 0): a
// reduction kernel for each max and one for the output.
v1::CompileRequest MaxesBroadcastBack(int n) {
  v1::CompileRequest r;
  v1::Chain* c = r.mutable_chain();
  v1::TensorSpec* in = c->add_inputs();
  in->set_name("x");
  in->set_dtype(v1::DTYPE_F32);
  in->add_shape()->set_size(64);
  in->add_shape()->set_size(1024);
  c->add_ops()->set_kind(v1::OP_NEG);
  c->mutable_ops(0)->add_args()->set_input(0);
  int32_t y = 0;
  for (int i = 0; i < n; ++i) {
    v1::Op* mx = c->add_ops();
    mx->set_kind(v1::OP_REDUCE_MAX);
    mx->add_args()->set_op(y);
    mx->mutable_reduce()->add_axes(0);
    mx->mutable_reduce()->set_keepdim(true);
    v1::Op* sub = c->add_ops();
    sub->set_kind(v1::OP_SUB);
    sub->add_args()->set_op(y);
    sub->add_args()->set_op(c->ops_size() - 2);
    y = c->ops_size() - 1;
  }
  v1::Output* out = c->add_outputs();
  out->set_name("y");
  out->mutable_value()->set_op(y);
  return r;
}

v1::CompileRequest Relu(double scale, bool background = false) {
  v1::CompileRequest r = ScaledActivation(v1::OP_RELU, scale);
  r.mutable_policy()->set_background(background);
  return r;
}

class ServerTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds delay, int max_queued = 64, bool metrics = false,
             int64_t store_max_bytes = int64_t{1} << 30, int job_threads = 2,
             int64_t max_message_bytes = int64_t{64} << 20, bool keep_store = false) {
    if (metrics) metrics_ = *Metrics::Create("");
    compiler_ = std::make_unique<FakeCompiler>(delay);
    if (!keep_store) {
      StoreOptions so;
      store_path_ = service_testing::TestStorePath();
      so.path = store_path_;
      so.max_bytes = store_max_bytes;
      store_ = *Store::Open(so);
    }
    PipelineDeps deps;
    deps.compiler = compiler_.get();
    deps.store = store_.get();
    deps.metrics = metrics_.get();
    PipelineOptions po;
    po.max_message_bytes = max_message_bytes;
    pipeline_ = std::make_unique<Pipeline>(std::move(deps), po);
    ServiceOptions opts;
    opts.max_queued_jobs = max_queued;
    opts.job_threads = job_threads;
    opts.metrics = metrics_.get();
    service_ = std::make_unique<KernelServiceImpl>(pipeline_.get(), opts);
    server_ = std::make_unique<service_testing::LoopbackServer>(service_.get());
    stub_ = server_->stub();
  }
  void TearDown() override {
    server_.reset();
    if (service_) service_->Drain();
  }
  grpc::Status Compile(const v1::CompileRequest& req, v1::CompileResponse* resp,
                       std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    return stub_->Compile(&ctx, req, resp);
  }

  // Outlives the service and pipeline that count into it (declared first,
  // destroyed last).
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<FakeCompiler> compiler_;
  std::string store_path_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<KernelServiceImpl> service_;
  std::unique_ptr<service_testing::LoopbackServer> server_;
  v1::KernelService::Stub* stub_ = nullptr;  // server_'s.
};

TEST_F(ServerTest, IdenticalConcurrentRequestsShareOneJob) {
  Start(std::chrono::milliseconds(300));
  constexpr int kCallers = 8;
  std::vector<std::thread> callers;
  std::atomic<int> ok{0}, misses{0};
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&] {
      v1::CompileResponse resp;
      if (Compile(Relu(2.0), &resp).ok()) {
        ++ok;
        if (resp.cache() == v1::CACHE_OUTCOME_MISS) ++misses;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(ok.load(), kCallers);
  EXPECT_EQ(compiler_->calls.load(), 1);
  EXPECT_EQ(misses.load(), 1);
  v1::CompileResponse again;
  ASSERT_TRUE(Compile(Relu(2.0), &again).ok());
  EXPECT_EQ(again.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(compiler_->calls.load(), 1);
}

TEST_F(ServerTest, EveryListedArchCompilesAndOnlyThose) {
  // GetDeviceInfo's targets are what a Compile's Target can ask for: NVRTC's
  // own list also holds targets kfuse does not generate for (sm_75) and
  // family targets no Target names (sm_100f).
  Start(std::chrono::milliseconds(0));
  grpc::ClientContext ctx;
  v1::DeviceInfo info;
  ASSERT_TRUE(stub_->GetDeviceInfo(&ctx, {}, &info).ok());
  ASSERT_GT(info.supported_archs_size(), 0);
  for (const std::string& arch : info.supported_archs()) {
    SCOPED_TRACE(arch);
    EXPECT_THAT(arch, Not(AnyOf(HasSubstr("f"), Eq("sm_75"), Eq("sm_120a"))));
    absl::string_view cc = arch;
    ASSERT_TRUE(absl::ConsumePrefix(&cc, "sm_"));
    v1::CompileRequest req = Relu(5.0);
    req.mutable_target()->set_arch_specific(absl::ConsumeSuffix(&cc, "a"));
    uint32_t n = 0;
    ASSERT_TRUE(absl::SimpleAtoi(cc, &n));
    req.mutable_target()->set_compute_capability(n);
    v1::CompileResponse resp;
    grpc::Status s = Compile(req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.plan().kernels(0).arch(), arch);
  }
  // A target without an arch-specific form is named, not built without it.
  v1::CompileRequest req = Relu(5.0);
  req.mutable_target()->set_compute_capability(80);
  req.mutable_target()->set_arch_specific(true);
  v1::CompileResponse resp;
  grpc::Status s = Compile(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "target.arch_specific: sm_80 has no arch-specific target (sm_90a and sm_100a do)");
}

TEST_F(ServerTest, DeadlineEndsTheWaitAndAnAbandonedJobIsCancelled) {
  Start(std::chrono::milliseconds(600));
  v1::CompileResponse resp;
  grpc::Status s = Compile(Relu(3.0), &resp, std::chrono::milliseconds(100));
  EXPECT_TRUE(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
              s.error_code() == grpc::StatusCode::CANCELLED)
      << s.error_message();
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  // Nobody waited and it was not background work: nothing was stored.
  grpc::ClientContext ctx;
  v1::CompileResponse looked;
  EXPECT_EQ(stub_->Lookup(&ctx, Relu(3.0), &looked).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, ARetryAfterADeadlineGetsAnAnswerNotTheCancelledJob) {
  Start(std::chrono::milliseconds(500));
  v1::CompileResponse first;
  EXPECT_FALSE(Compile(Relu(7.0), &first, std::chrono::milliseconds(100)).ok());
  v1::CompileResponse retry;
  grpc::Status s = Compile(Relu(7.0), &retry);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(ServerTest, JoinedCallersGetTheirOwnNamesAndRequestIds) {
  Start(std::chrono::milliseconds(400));
  v1::CompileRequest a = Relu(8.0), b = Relu(8.0);
  a.mutable_chain()->mutable_outputs(0)->set_name("first");
  a.set_request_id("req-a");
  b.mutable_chain()->mutable_outputs(0)->set_name("second");
  b.set_request_id("req-b");
  v1::CompileResponse ra, rb;
  std::thread t([&] { ASSERT_TRUE(Compile(a, &ra).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(Compile(b, &rb).ok());
  t.join();
  EXPECT_EQ(compiler_->calls.load(), 1);
  EXPECT_EQ(ra.plan().outputs(0).name(), "first");
  EXPECT_EQ(rb.plan().outputs(0).name(), "second");
  EXPECT_EQ(ra.request_id(), "req-a");
  EXPECT_EQ(rb.request_id(), "req-b");
  EXPECT_EQ(rb.cache(), v1::CACHE_OUTCOME_JOINED);
}

// Whether a caller wants the sources does not make its build another job:
// one build, and each answer has sources only if its caller asked.
TEST_F(ServerTest, CallersThatDifferOnlyInWantingSourcesShareOneJob) {
  Start(std::chrono::milliseconds(400));
  for (bool first_wants_sources : {false, true}) {
    SCOPED_TRACE(first_wants_sources);
    const int calls_before = compiler_->calls.load();
    v1::CompileRequest a = Relu(first_wants_sources ? 12.0 : 11.0), b = a;
    a.set_include_source(first_wants_sources);
    b.set_include_source(!first_wants_sources);
    v1::CompileResponse ra, rb;
    std::thread t([&] { ASSERT_TRUE(Compile(a, &ra).ok()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(Compile(b, &rb).ok());
    t.join();
    EXPECT_EQ(compiler_->calls.load(), calls_before + 1);
    EXPECT_EQ(rb.cache(), v1::CACHE_OUTCOME_JOINED);
    const v1::CompileResponse& with = first_wants_sources ? ra : rb;
    const v1::CompileResponse& without = first_wants_sources ? rb : ra;
    ASSERT_GT(with.plan().kernels_size(), 0);
    for (const v1::Kernel& k : with.plan().kernels()) EXPECT_THAT(k.source(), HasSubstr("__global__"));
    for (const v1::Kernel& k : without.plan().kernels()) EXPECT_EQ(k.source(), "");
    // A repeat that wants the sources after the build has them too.
    v1::CompileRequest again = a;
    again.set_include_source(true);
    v1::CompileResponse ragain;
    ASSERT_TRUE(Compile(again, &ragain).ok());
    EXPECT_THAT(ragain.plan().kernels(0).source(), HasSubstr("__global__"));
  }
}

// kfuse_lookups_total counts each request once: a miss that built, one
// that joined the running job, and hits from the answers kept in memory
// (the repeat of an identical request) as well as from the store.
TEST_F(ServerTest, LookupMetricsCountEveryRequestOnce) {
  Start(std::chrono::milliseconds(400), 64, /*metrics=*/true);
  v1::CompileResponse first, joined;
  std::thread t([&] { ASSERT_TRUE(Compile(Relu(9.0), &first).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(Compile(Relu(9.0), &joined).ok());
  t.join();
  ASSERT_EQ(joined.cache(), v1::CACHE_OUTCOME_JOINED);
  for (int i = 0; i < 5; ++i) {
    v1::CompileResponse again;
    ASSERT_TRUE(Compile(Relu(9.0), &again).ok());
    EXPECT_EQ(again.cache(), v1::CACHE_OUTCOME_HIT);
  }
  const std::string text = metrics_->Text();
  auto count = [&](const std::string& labels) {  // 0 when the series is absent.
    const std::string head = "kfuse_lookups_total{" + labels + "} ";
    for (absl::string_view l : absl::StrSplit(text, '\n')) {
      int n = 0;
      if (absl::ConsumePrefix(&l, head) && absl::SimpleAtoi(l, &n)) return n;
    }
    return 0;
  };
  EXPECT_EQ(count("result=\"miss\",tier=\"local\""), 2) << text;  // The builder and the joiner.
  EXPECT_EQ(count("result=\"joined\",tier=\"job\""), 1) << text;
  EXPECT_EQ(count("result=\"hit\",tier=\"local\"") + count("result=\"hit\",tier=\"memory\""), 5)
      << text;
  EXPECT_EQ(compiler_->calls.load(), 1);
}

// Fields the server ignores (a newer client's, unknown here) still key the
// memo (requests that differ anywhere never share an answer), but through a
// digest: a chain padded with a megabyte of them costs the memo its answer
// and a short key, not the megabyte.
TEST_F(ServerTest, PaddedRequestsCostTheMemoTheirAnswerNotTheirSize) {
  Start(std::chrono::milliseconds(0));
  int64_t answers = 0;
  for (int i = 0; i < 4; ++i) {
    v1::CompileRequest r = Relu(3.0);
    r.mutable_chain()->GetReflection()->MutableUnknownFields(r.mutable_chain())->AddLengthDelimited(
        1000, std::string(1 << 20, static_cast<char>('a' + i)));
    v1::CompileResponse resp;
    ASSERT_TRUE(Compile(r, &resp).ok());
    EXPECT_EQ(resp.cache(), i == 0 ? v1::CACHE_OUTCOME_MISS : v1::CACHE_OUTCOME_HIT);  // One chain.
    answers += static_cast<int64_t>(resp.ByteSizeLong());
  }
  EXPECT_GT(service_->memo_bytes(), 0);
  EXPECT_LT(service_->memo_bytes(), answers + 4 * 1024);
}

// A build whose only caller's deadline passed ends CANCELLED and is timed
// as such, not as a build error.
TEST_F(ServerTest, ABuildEveryCallerLeftIsTimedAsCancelled) {
  // The build takes 1 s; the caller leaves after 0.3 s, long after an idle
  // job thread took the job (a job still queued then would never build).
  Start(std::chrono::milliseconds(1000), 64, /*metrics=*/true);
  v1::CompileResponse r;
  EXPECT_EQ(Compile(Relu(11.0), &r, std::chrono::milliseconds(300)).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  const std::string line = "kfuse_tuning_seconds_count{how=\"cancelled\"} 1";
  std::string text;
  for (int i = 0; i < 100 && text.find(line) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = metrics_->Text();
  }
  EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find("how=\"error\""), std::string::npos) << text;
}

// A plan the store cannot keep (here: larger than its cap) is still the
// answer; the failure is counted and the next request builds again.
TEST_F(ServerTest, AStoreThatCannotKeepAPlanStillAnswersAndCountsIt) {
  Start(std::chrono::milliseconds(0), 64, /*metrics=*/true, /*store_max_bytes=*/16);
  v1::CompileResponse r;
  ASSERT_TRUE(Compile(Relu(12.0), &r).ok());
  EXPECT_FALSE(r.plan().key().empty());
  EXPECT_THAT(metrics_->Text(), ::testing::HasSubstr("kfuse_store_errors_total{op=\"put\"} "));
}

// A second server on the same store file (another process, as here another
// Store object) deletes a kernel: this server stops answering it from memory
// once its store has seen the file's invalidation counter move.
TEST_F(ServerTest, ADeleteThroughAnotherServerOnTheStoreIsNotServedFromMemory) {
  Start(std::chrono::milliseconds(0));
  v1::CompileResponse first, again;
  ASSERT_TRUE(Compile(Relu(4.0), &first).ok());
  ASSERT_TRUE(Compile(Relu(4.0), &again).ok());
  ASSERT_EQ(again.cache(), v1::CACHE_OUTCOME_HIT);
  StoreOptions so;
  so.path = store_path_;
  absl::StatusOr<std::unique_ptr<Store>> other = Store::Open(so);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<int> n = (*other)->DeleteAll();
  ASSERT_TRUE(n.ok() && *n > 0) << n.status();
  ASSERT_TRUE(store_->PollInvalidations().ok());  // What its thread does once a second.
  v1::CompileResponse after;
  ASSERT_TRUE(Compile(Relu(4.0), &after).ok());
  EXPECT_EQ(after.cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_EQ(compiler_->calls.load(), 2);
}

// A build files its artifact with the key of the decision it made, so
// removing the kernel removes that decision too: the next request is tuned
// again, not rebuilt from the old choice.
TEST_F(ServerTest, RemovingAKernelRemovesTheDecisionItWasBuiltFrom) {
  Start(std::chrono::milliseconds(0));
  v1::CompileResponse built;
  ASSERT_TRUE(Compile(Relu(5.5), &built).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(store_path_.c_str(), &db), SQLITE_OK);
  int linked = -1;
  ASSERT_EQ(sqlite3_exec(
                db, "SELECT count(*) FROM artifacts a JOIN decisions d ON d.key = a.decision_key",
                [](void* out, int, char** v, char**) {
                  *static_cast<int*>(out) = std::atoi(v[0]);
                  return 0;
                },
                &linked, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(linked, 1);
  grpc::ClientContext ctx;
  v1::DeleteKernelsRequest del;
  del.add_keys(built.plan().key());
  v1::DeleteKernelsResponse deleted;
  ASSERT_TRUE(stub_->DeleteKernels(&ctx, del, &deleted).ok());
  EXPECT_EQ(deleted.deleted(), 2u);  // The kernel and its decision.
}

// A store that cannot be read (here another process dropped a table
// under it) costs a build, not the request.
TEST_F(ServerTest, AStoreThatCannotBeReadIsAMissNotAnError) {
  Start(std::chrono::milliseconds(0), 64, /*metrics=*/true);
  v1::CompileResponse first;
  ASSERT_TRUE(Compile(Relu(4.5), &first).ok());
  pipeline_->ClearHot();
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(store_path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "DROP TABLE artifacts", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  v1::CompileResponse again;
  grpc::Status s = Compile(Relu(4.5), &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(again.cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_EQ(compiler_->calls.load(), 2);
  EXPECT_NE(metrics_->Text().find("kfuse_store_errors_total{op=\"get\"}"), std::string::npos) << metrics_->Text();
}

TEST_F(ServerTest, AHitNamesTheReportsSizesByThisRequestsSymbols) {
  // The key ignores client names: a hit may come from a request that called
  // the symbol otherwise, and its reports' sizes must not carry that name.
  Start(std::chrono::milliseconds(0));
  auto symbolic = [](const std::string& name) {
    v1::CompileRequest r = Relu(6.0);
    v1::Dim* d = r.mutable_chain()->mutable_inputs(0)->mutable_shape(0);
    d->set_symbol(name);
    d->set_hint(77);
    return r;
  };
  v1::CompileResponse first, second;
  ASSERT_TRUE(Compile(symbolic("Q"), &first).ok());
  ASSERT_TRUE(Compile(symbolic("R"), &second).ok());
  EXPECT_EQ(second.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(first.plan().report().sizes().count("Q"), 1u);
  EXPECT_EQ(second.plan().symbols(0).name(), "R");
  EXPECT_EQ(second.plan().report().sizes().count("Q"), 0u);
  EXPECT_EQ(second.plan().report().sizes().at("R"), 128);
  EXPECT_EQ(second.plan().kernels(0).report().sizes().count("Q"), 0u);
  EXPECT_EQ(second.plan().kernels(0).report().sizes().at("R"), 128);
}

TEST_F(ServerTest, APolicyTargetOrLoggedTextOutOfRangeIsInvalidArgumentNamingTheField) {
  Start(std::chrono::milliseconds(0));
  struct Case {
    std::function<void(v1::CompileRequest&)> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::CompileRequest& r) { r.mutable_policy()->set_mode(static_cast<v1::TuningPolicy::Mode>(99)); },
       "policy.mode: unknown value 99"},
      {[](v1::CompileRequest& r) { r.mutable_policy()->set_budget_seconds(-5); }, "policy.budget_seconds: -5 "},
      {[](v1::CompileRequest& r) { r.mutable_policy()->set_budget_seconds(std::nan("")); },
       "policy.budget_seconds: nan "},
      {[](v1::CompileRequest& r) { r.mutable_policy()->set_budget_seconds(1e308); },
       "policy.budget_seconds: 1e+308 is not between 0 and 3600"},
      // Every digit that tells it from the bound.
      {[](v1::CompileRequest& r) { r.mutable_policy()->set_budget_seconds(3600.0001); },
       "policy.budget_seconds: 3600.0001 is not between 0 and 3600"},
      {[](v1::CompileRequest& r) { r.mutable_target()->set_compute_capability(4294967295u); },
       "target.compute_capability: 4294967295 (sm_4294967295) is not supported (use 80, 86, 87, 89, 90, 100, 120; "
       "--arch sm_80, sm_86"},
      {[](v1::CompileRequest& r) { r.set_request_id(std::string(257, 'r')); }, "request_id: 257 bytes; at most 256"},
      {[](v1::CompileRequest& r) { r.mutable_env()->set_client(std::string(1 << 20, 'c')); },
       "env.client: 1048576 bytes; at most 256"},
  };
  for (const Case& c : cases) {
    v1::CompileRequest r = Relu(7.0);
    c.set(r);
    v1::CompileResponse resp;
    grpc::Status s = Compile(r, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
  }
  EXPECT_EQ(compiler_->calls.load(), 0);
}

TEST(ToGrpcTest, LongMessagesAreCutToFitATrailer) {
  const grpc::Status s = ToGrpc(absl::InternalError(std::string(10000, 'x')));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_LT(s.error_message().size(), 4200u);
  EXPECT_NE(s.error_message().find("... (5904 more bytes)"), std::string::npos);
  EXPECT_EQ(ToGrpc(absl::InvalidArgumentError("short")).error_message(), "short");
}

TEST_F(ServerTest, RequestsWithoutAnIdGetOne) {
  Start(std::chrono::milliseconds(0));
  v1::CompileResponse miss, hit;
  ASSERT_TRUE(Compile(Relu(9.0), &miss).ok());
  ASSERT_TRUE(Compile(Relu(9.0), &hit).ok());
  EXPECT_FALSE(miss.request_id().empty());
  EXPECT_FALSE(hit.request_id().empty());
  EXPECT_NE(miss.request_id(), hit.request_id());
}

TEST_F(ServerTest, BackgroundJobFinishesAfterTheCallerLeaves) {
  Start(std::chrono::milliseconds(400));
  v1::CompileResponse resp;
  grpc::Status s = Compile(Relu(4.0, /*background=*/true), &resp, std::chrono::milliseconds(100));
  EXPECT_FALSE(s.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  v1::CompileResponse hit;
  ASSERT_TRUE(Compile(Relu(4.0), &hit).ok());
  EXPECT_EQ(hit.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(compiler_->calls.load(), 1);
}

TEST_F(ServerTest, BadInputIsInvalidArgumentNamingTheOp) {
  Start(std::chrono::milliseconds(0));
  v1::CompileRequest bad = Relu(2.0);
  bad.mutable_chain()->mutable_ops(1)->mutable_args(1)->set_op(7);
  v1::CompileResponse resp;
  grpc::Status s = Compile(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("ops[1]"), std::string::npos) << s.error_message();
  EXPECT_EQ(compiler_->calls.load(), 0);
}

TEST_F(ServerTest, OpsWithoutAGeneratorAreUnimplementedNamingTheOp) {
  Start(std::chrono::milliseconds(0));
  // An iota in a matrix product's epilogue is not generated yet:
  // (x @ w) * arange(64).
  v1::CompileRequest r;
  v1::Chain* c = r.mutable_chain();
  for (const char* name : {"x", "w"}) {
    v1::TensorSpec* in = c->add_inputs();
    in->set_name(name);
    in->set_dtype(v1::DTYPE_BF16);
    in->add_shape()->set_size(64);
    in->add_shape()->set_size(64);
  }
  v1::Op* product = c->add_ops();
  product->set_kind(v1::OP_MATMUL);
  product->add_args()->set_input(0);
  product->add_args()->set_input(1);
  v1::Op* index = c->add_ops();
  index->set_kind(v1::OP_IOTA);
  index->set_dtype(v1::DTYPE_BF16);
  index->mutable_shape()->add_shape()->set_size(64);
  index->mutable_axis()->set_axis(0);
  v1::Op* scaled = c->add_ops();
  scaled->set_kind(v1::OP_MUL);
  scaled->add_args()->set_op(0);
  scaled->add_args()->set_op(1);
  c->add_outputs()->mutable_value()->set_op(2);
  v1::CompileResponse resp;
  grpc::Status s = Compile(r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_NE(s.error_message().find("op 1 (iota): iota beside a matrix product is not generated yet"),
            std::string::npos)
      << s.error_message();
}

// A chain of more kernels than a plan holds is refused before any is built
// (a reduction broadcast back 256 times: one kernel each, each recomputing
// its operands, took minutes and a 171 MB plan at 257 kernels).
TEST_F(ServerTest, AChainOfMoreKernelsThanAPlanHoldsIsUnimplementedBeforeABuild) {
  Start(std::chrono::milliseconds(0));
  v1::CompileRequest r = MaxesBroadcastBack(128);
  v1::Chain* c = r.mutable_chain();
  const int32_t y = c->outputs(0).value().op();
  v1::CompileResponse resp;
  grpc::Status s = Compile(r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("partitions into 129 kernels; a plan holds at most 128"));
  EXPECT_EQ(compiler_->calls.load(), 0);
  // 127 reductions: 128 kernels, built.
  c->mutable_ops()->RemoveLast();
  c->mutable_ops()->RemoveLast();
  c->mutable_outputs(0)->mutable_value()->set_op(y - 2);
  s = Compile(r, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.plan().kernels_size(), 128);
}

// A plan larger than the server may send is refused whole and not stored:
// stored, it would fail at every hit. One stored by a node allowed larger
// answers (sharing the store) is a miss, then refused the same way.
TEST_F(ServerTest, APlanLargerThanAnAnswerMayBeIsUnimplementedAndNotStored) {
  constexpr int64_t kSmall = 1500;
  Start(std::chrono::milliseconds(0), 64, false, int64_t{1} << 30, 2, kSmall);
  v1::CompileResponse resp;
  grpc::Status s = Compile(Relu(2.0), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("past what an answer may take (kfused --max_message_bytes 1500)"));
  absl::StatusOr<std::vector<EntrySummary>> stored = store_->List("", 10);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(stored->empty());
  // A retry is refused at once, not built again; a forced request builds.
  const int calls = compiler_->calls.load();
  s = Compile(Relu(2.0), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("past what an answer may take"));
  EXPECT_THAT(s.error_message(), HasSubstr("found when it was built"));
  EXPECT_EQ(compiler_->calls.load(), calls);
  v1::CompileRequest forced = Relu(2.0);
  forced.mutable_policy()->set_force(true);
  s = Compile(forced, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_THAT(s.error_message(), Not(HasSubstr("found when it was built")));
  EXPECT_EQ(compiler_->calls.load(), calls + 1);

  TearDown();
  Start(std::chrono::milliseconds(0), 64, false, int64_t{1} << 30, 2, int64_t{64} << 20, /*keep_store=*/true);
  ASSERT_TRUE(Compile(Relu(2.0), &resp).ok());
  ASSERT_FALSE(store_->List("", 10)->empty());
  TearDown();
  Start(std::chrono::milliseconds(0), 64, false, int64_t{1} << 30, 2, kSmall, /*keep_store=*/true);
  s = Compile(Relu(2.0), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
}

// A caller's long names (a symbol's recurs in every shape and size report)
// can make an answer too large to send where the plan with short names
// fits: that caller gets INVALID_ARGUMENT naming the names, the plan is
// stored, and callers with short names are served, whichever came first.
TEST_F(ServerTest, LongNamesPastTheMessageLimitAreRefusedForTheirCallerOnly) {
  auto named = [](const std::string& name) {
    v1::CompileRequest r = Relu(2.0);
    v1::TensorSpec* x = r.mutable_chain()->mutable_inputs(0);
    x->set_name(name);
    x->mutable_shape(0)->set_symbol(name);
    x->mutable_shape(0)->set_hint(4096);
    r.mutable_chain()->mutable_outputs(0)->set_name(name);
    r.set_include_source(true);  // So the answers hold all the plan's code.
    return r;
  };
  const std::string long_name(1024, 'n');
  Start(std::chrono::milliseconds(0));  // The two answers' sizes, unlimited.
  v1::CompileResponse short_resp, long_resp;
  ASSERT_TRUE(Compile(named("n"), &short_resp).ok());
  ASSERT_TRUE(Compile(named(long_name), &long_resp).ok());
  const int64_t short_bytes = static_cast<int64_t>(short_resp.ByteSizeLong());
  const int64_t long_bytes = static_cast<int64_t>(long_resp.ByteSizeLong());
  ASSERT_GT(long_bytes, short_bytes + 4000);
  TearDown();
  // A limit between them: the short answer fits with the sixteenth spare.
  const int64_t limit = (short_bytes + 300) * 16 / 15 + 16;
  ASSERT_LT(limit + 1000, long_bytes);
  Start(std::chrono::milliseconds(0), 64, false, int64_t{1} << 30, 2, limit);
  grpc::Status s = Compile(named(long_name), &long_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("names: with this request's input, output and symbol names"));
  s = Compile(named("n"), &short_resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(short_resp.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(compiler_->calls.load(), 1);
  s = Compile(named(long_name), &long_resp);  // A hit now, refused the same way.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(compiler_->calls.load(), 1);
  // The store holds the plan without the long names: an export or a
  // fleet peer can send it.
  absl::StatusOr<std::vector<EntrySummary>> stored = store_->List("", 10, "artifact");
  ASSERT_TRUE(stored.ok() && stored->size() == 1u) << stored.status();
  EXPECT_LT((*stored)[0].bytes, short_bytes + 100);

  // The other order: the short names build, the long ones are refused.
  TearDown();
  Start(std::chrono::milliseconds(0), 64, false, int64_t{1} << 30, 2, limit);
  ASSERT_TRUE(Compile(named("n"), &short_resp).ok());
  EXPECT_EQ(short_resp.cache(), v1::CACHE_OUTCOME_MISS);
  s = Compile(named(long_name), &long_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  ASSERT_TRUE(Compile(named("m"), &short_resp).ok());
  EXPECT_EQ(compiler_->calls.load(), 1);
}

// Texts that quote symbol names (a kernel's partition reason) are stored
// without them and read with each caller's own, as the symbols are.
TEST_F(ServerTest, APartitionReasonNamesEachCallersSymbols) {
  Start(std::chrono::milliseconds(0));
  auto named = [](const std::string& a, const std::string& b) {
    v1::CompileRequest r;
    v1::Chain* c = r.mutable_chain();
    for (const auto& [name, symbol] : {std::pair<std::string, std::string>{"x", a}, {"y", b}}) {
      v1::TensorSpec* in = c->add_inputs();
      in->set_name(name);
      in->set_dtype(v1::DTYPE_F32);
      in->add_shape()->set_symbol(symbol);
      in->mutable_shape(0)->set_hint(1024);
      if (name == "y") in->add_shape()->set_size(3);
    }
    for (uint32_t i = 0; i < 2; ++i) {
      v1::Op* relu = c->add_ops();
      relu->set_kind(v1::OP_RELU);
      relu->add_args()->set_input(i);
      v1::Output* out = c->add_outputs();
      out->set_name(absl::StrCat("o", i));
      out->mutable_value()->set_op(i);
    }
    return r;
  };
  auto reasons = [](const v1::CompileResponse& resp) {
    std::string all;
    for (const v1::Kernel& k : resp.plan().kernels()) absl::StrAppend(&all, k.partition_reason(), "\n");
    return all;
  };
  v1::CompileResponse first, second;
  ASSERT_TRUE(Compile(named("NAMEONE", "NAMETWO"), &first).ok());
  EXPECT_THAT(reasons(first), HasSubstr("\"NAMEONE\""));
  ASSERT_TRUE(Compile(named("alpha", "beta"), &second).ok());
  EXPECT_EQ(second.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_THAT(reasons(second), HasSubstr("\"alpha\""));
  EXPECT_THAT(reasons(second), HasSubstr("\"beta\""));
  EXPECT_THAT(reasons(second), Not(HasSubstr("NAME")));
  // Swapped: one pass, so s0 and s1 do not run into each other.
  ASSERT_TRUE(Compile(named("NAMETWO", "NAMEONE"), &second).ok());
  EXPECT_THAT(reasons(second), HasSubstr("over [\"NAMETWO\"]"));
}

// A plan whose first kernels' code is already past the limit is refused
// without building the rest.
TEST_F(ServerTest, APlanPastTheLimitIsRefusedBeforeItsLastKernelsAreBuilt) {
  Start(std::chrono::milliseconds(0), 64, false, int64_t{1} << 30, 2, /*max_message_bytes=*/4000);
  v1::CompileRequest r = MaxesBroadcastBack(6);  // Seven kernels.
  v1::CompileResponse resp;
  grpc::Status s = Compile(r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("7 kernels, "));
  EXPECT_THAT(s.error_message(), HasSubstr(" built), past what an answer may take"));
  EXPECT_GT(compiler_->calls.load(), 0);
  EXPECT_LT(compiler_->calls.load(), 7);
}

TEST_F(ServerTest, ARowReductionChainIsOneRowKernel) {
  Start(std::chrono::milliseconds(0));
  v1::CompileRequest r = Relu(2.0);
  v1::Op* sum = r.mutable_chain()->add_ops();
  sum->set_kind(v1::OP_REDUCE_SUM);
  sum->add_args()->set_op(2);
  sum->mutable_reduce()->add_axes(-1);
  sum->mutable_reduce()->set_keepdim(true);
  r.mutable_chain()->mutable_outputs(0)->mutable_value()->set_op(3);
  v1::CompileResponse resp;
  grpc::Status s = Compile(r, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.plan().kernels_size(), 1);
  EXPECT_EQ(resp.plan().kernels(0).variant().family(), v1::FAMILY_ROW_REDUCTION);
  EXPECT_EQ(resp.plan().provenance().generator_version(), "row/20");
}

// A forced rebuild asks for a fresh build; joining a running job that may
// reuse the stored decision would drop what it asked for.
TEST_F(ServerTest, AForcedRequestDoesNotJoinAnUnforcedJob) {
  Start(std::chrono::milliseconds(800));
  v1::CompileResponse plain_resp, forced_resp;
  grpc::Status plain;
  std::thread a([&] { plain = Compile(Relu(9.0), &plain_resp); });
  absl::SleepFor(absl::Milliseconds(200));
  v1::CompileRequest forced = Relu(9.0);
  forced.mutable_policy()->set_force(true);
  ASSERT_TRUE(Compile(forced, &forced_resp).ok());
  a.join();
  ASSERT_TRUE(plain.ok()) << plain.error_message();
  EXPECT_EQ(plain_resp.cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_EQ(forced_resp.cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_EQ(compiler_->calls.load(), 2);
}

TEST_F(ServerTest, WithNoQueueAnIdleThreadStillTakesAMiss) {
  Start(std::chrono::milliseconds(0), /*max_queued=*/0, false, int64_t{1} << 30, /*job_threads=*/1);
  v1::CompileResponse resp;
  EXPECT_TRUE(Compile(Relu(5.0), &resp).ok());
}

// One thread, one queue place. A job whose caller left frees its place at
// once; a job somebody waits for holds it.
// Waits (at most 10 s) until `done` holds.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000 && !done(); ++i) absl::SleepFor(absl::Milliseconds(10));
  return done();
}

TEST_F(ServerTest, FullQueueIsResourceExhaustedAndALeftJobFreesItsPlace) {
  Start(std::chrono::milliseconds(3000), /*max_queued=*/1, false, int64_t{1} << 30, /*job_threads=*/1);
  v1::CompileResponse running_resp, later_resp;
  grpc::Status running, later;
  std::thread a([&] { running = Compile(Relu(1.0), &running_resp); });  // Takes the thread.
  ASSERT_TRUE(Eventually([&] { return service_->building() == 1; }));
  v1::CompileResponse resp;
  // Queued, then left at its deadline.
  EXPECT_EQ(Compile(Relu(2.0), &resp, std::chrono::milliseconds(300)).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(Eventually([&] { return service_->queued_jobs() == 0; }));  // The server saw it leave.
  std::thread c([&] { later = Compile(Relu(3.0), &later_resp); });  // The place the left job had.
  ASSERT_TRUE(Eventually([&] { return service_->queued_jobs() == 1; }));
  EXPECT_EQ(Compile(Relu(4.0), &resp, std::chrono::milliseconds(500)).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  a.join();
  c.join();
  EXPECT_TRUE(running.ok()) << running.error_message();
  EXPECT_TRUE(later.ok()) << later.error_message();
}

TEST_F(ServerTest, TuneStreamsToAResultAndHeuristicPlansSayWhy) {
  Start(std::chrono::milliseconds(0));
  grpc::ClientContext ctx;
  auto reader = stub_->Tune(&ctx, Relu(6.0));
  v1::TuneProgress msg, last;
  while (reader->Read(&msg)) last = msg;
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(last.has_result());
  const v1::KernelPlan& plan = last.result().plan();
  EXPECT_EQ(plan.api_version(), "kfuse.v1");
  EXPECT_EQ(plan.provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_FALSE(plan.provenance().reason().empty());
  ASSERT_EQ(plan.kernels_size(), 1);
  EXPECT_EQ(plan.outputs(0).name(), "y");
  EXPECT_EQ(plan.report().bound(), v1::BOUND_MEMORY);
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// The buffers kernel `k` of `plan` names, as "input 0", "intermediate 1", ...
std::vector<std::string> Buffers(const v1::Kernel& k) {
  std::vector<std::string> out;
  for (const v1::Param& p : k.params()) {
    if (p.kind() != v1::Param::KIND_BUFFER) continue;
    const v1::BufferRef& b = p.buffer();
    out.push_back(b.has_input()    ? "input " + std::to_string(b.input())
                  : b.has_output() ? "output " + std::to_string(b.output())
                                   : "intermediate " + std::to_string(b.intermediate()));
  }
  return out;
}

TEST_F(ServerTest, SoftmaxOverAnOuterAxisIsAPlanOfThreeKernels) {
  Start(std::chrono::milliseconds(0));
  v1::CompileResponse resp;
  grpc::Status s = Compile(ColumnSoftmax(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::KernelPlan& plan = resp.plan();
  ASSERT_EQ(plan.kernels_size(), 3);
  EXPECT_EQ(plan.kernels(0).variant().family(), v1::FAMILY_REDUCTION);
  EXPECT_EQ(plan.kernels(1).variant().family(), v1::FAMILY_REDUCTION);
  EXPECT_EQ(plan.kernels(2).variant().family(), v1::FAMILY_POINTWISE);
  EXPECT_EQ(plan.kernels(0).variant().params().at("block"), 256);
  absl::StatusOr<Prepared> p = pipeline_->Prepare(ColumnSoftmax());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(plan.provenance().generator_version(),
            "reduce/7+pointwise/4+plan/" + PartitionDigest(p->chain, p->partition));
  EXPECT_EQ(plan.provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_EQ(compiler_->calls.load(), 3);
  // Ops as the client numbered them, and why each boundary is there.
  EXPECT_EQ(std::vector<uint32_t>(plan.kernels(0).ops().begin(), plan.kernels(0).ops().end()),
            std::vector<uint32_t>{0});
  EXPECT_EQ(std::vector<uint32_t>(plan.kernels(1).ops().begin(), plan.kernels(1).ops().end()),
            (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(std::vector<uint32_t>(plan.kernels(2).ops().begin(), plan.kernels(2).ops().end()),
            (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_NE(plan.kernels(0).partition_reason().find("op 0 (reduce_max) over outer axes [0]"),
            std::string::npos)
      << plan.kernels(0).partition_reason();
  EXPECT_NE(plan.kernels(2).partition_reason().find("reading op 0 (reduce_max), op 3 (reduce_sum)"),
            std::string::npos)
      << plan.kernels(2).partition_reason();
  // The max and the sum travel between kernels through intermediate buffers.
  const std::vector<std::string> k0 = Buffers(plan.kernels(0)), k1 = Buffers(plan.kernels(1)),
                                 k2 = Buffers(plan.kernels(2));
  ASSERT_EQ(k0.size(), 2u);
  EXPECT_EQ(k0[0], "input 0");
  EXPECT_EQ(k0[1].rfind("intermediate ", 0), 0u);
  ASSERT_EQ(k1.size(), 3u);
  EXPECT_EQ(k1[1], k0[1]);  // The max, read.
  EXPECT_EQ(k1[2].rfind("intermediate ", 0), 0u);
  EXPECT_EQ(k2, (std::vector<std::string>{"input 0", k0[1], k1[2], "output 0"}));
  EXPECT_EQ(plan.outputs(0).name(), "y");
}

// exp(rows) [4096, 1] and exp(cols) [1, 4096] as two outputs: their shapes
// do not nest, so each is a pointwise kernel of its own (one kernel would
// iterate over 4096 x 4096 to write 8192 values), and no intermediate
// passes between them.
v1::CompileRequest RowAndColumnScales() {
  v1::CompileRequest r;
  v1::Chain* c = r.mutable_chain();
  for (const char* name : {"rows", "cols"}) {
    v1::TensorSpec* in = c->add_inputs();
    in->set_name(name);
    in->set_dtype(v1::DTYPE_F32);
    const bool rows = std::string(name) == "rows";
    in->add_shape()->set_size(rows ? 4096 : 1);
    in->add_shape()->set_size(rows ? 1 : 4096);
  }
  for (int i = 0; i < 2; ++i) {
    v1::Op* e = c->add_ops();
    e->set_kind(v1::OP_EXP);
    e->add_args()->set_input(i);
    v1::Output* out = c->add_outputs();
    out->set_name(i == 0 ? "row_scale" : "col_scale");
    out->mutable_value()->set_op(i);
  }
  return r;
}

TEST_F(ServerTest, OutputsWhoseShapesDoNotNestAreAKernelEach) {
  Start(std::chrono::milliseconds(0));
  v1::CompileResponse resp;
  grpc::Status s = Compile(RowAndColumnScales(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::KernelPlan& plan = resp.plan();
  ASSERT_EQ(plan.kernels_size(), 2);
  EXPECT_EQ(plan.intermediates_size(), 0);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(Buffers(plan.kernels(k)),
              (std::vector<std::string>{"input 0", "input 1", absl::StrCat("output ", k)}));
    EXPECT_EQ(std::vector<uint32_t>(plan.kernels(k).ops().begin(), plan.kernels(k).ops().end()),
              std::vector<uint32_t>{static_cast<uint32_t>(k)});
    EXPECT_NE(plan.kernels(k).partition_reason().find("do not nest"), std::string::npos)
        << plan.kernels(k).partition_reason();
  }
  // Its own key: a node whose partitioner drew one kernel for these
  // outputs stored that plan under "pointwise/4".
  absl::StatusOr<Prepared> p = pipeline_->Prepare(RowAndColumnScales());
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string plan_version = "+plan/" + PartitionDigest(p->chain, p->partition);
  EXPECT_EQ(plan_version.size(), 6u + 16u);
  EXPECT_EQ(plan.provenance().generator_version(), "pointwise/4" + plan_version);
  EXPECT_EQ(p->key.generator, "pointwise/4" + plan_version);
  EXPECT_EQ(p->decision_key.generator, "pointwise-variants/2" + plan_version);
}

// Needs service/pipeline.cc to list Partition::intermediates in the plan
// (IntermediateBuffers) and to renumber the kernels' intermediate buffers to
// positions in that list (NumberIntermediates).
TEST_F(ServerTest, APlanOfSeveralKernelsListsItsIntermediates) {
  Start(std::chrono::milliseconds(0));
  v1::CompileResponse resp;
  grpc::Status s = Compile(ColumnSoftmax(), &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::KernelPlan& plan = resp.plan();
  ASSERT_EQ(plan.intermediates_size(), 2);
  for (const v1::Intermediate& im : plan.intermediates()) {
    EXPECT_EQ(im.dtype(), v1::DTYPE_F32);  // The bf16 max and sum, kept in f32.
    ASSERT_EQ(im.shape_size(), 2);  // [1, 1000]: keepdim.
    EXPECT_EQ(im.shape(0).constant(), 1);
    EXPECT_EQ(im.shape(1).constant(), 1000);
  }
  EXPECT_EQ(Buffers(plan.kernels(0)), (std::vector<std::string>{"input 0", "intermediate 0"}));
  EXPECT_EQ(Buffers(plan.kernels(1)),
            (std::vector<std::string>{"input 0", "intermediate 0", "intermediate 1"}));
  EXPECT_EQ(Buffers(plan.kernels(2)),
            (std::vector<std::string>{"input 0", "intermediate 0", "intermediate 1", "output 0"}));
}

}  // namespace
}  // namespace kfuse
