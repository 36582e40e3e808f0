// A server that can tune, with a fake GPU whose timing takes a while: a
// caller that cannot wait for tuning gets the heuristic kernel at once and
// the next caller the tuned one; a new generator version that keeps its
// variant schema reuses the stored decision instead of retuning.
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "service/service_test_util.h"

namespace kfuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;
using service_testing::FakeCompiler;
using service_testing::FakeGpu;
using service_testing::LoopbackServer;
using service_testing::ScaledActivation;
using service_testing::TestStorePath;

v1::CompileRequest Silu(double scale, bool background = false) {
  v1::CompileRequest r = ScaledActivation(v1::OP_SILU, scale, 1 << 20);
  r.mutable_policy()->set_background(background);
  return r;
}

// Silu(scale) over a symbol's worth of elements, 1000 at the hint.
v1::CompileRequest SiluOver(const std::string& symbol, double scale) {
  v1::CompileRequest r = Silu(scale);
  v1::Dim* d = r.mutable_chain()->mutable_inputs(0)->mutable_shape(0);
  d->set_symbol(symbol);
  d->set_hint(1000);
  return r;
}

class ColdStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TestStorePath();
    store_ = *Store::Open({.path = path_});
    pipeline_ = MakePipeline();
    Serve(ServiceOptions{});
  }
  // A pipeline on this test's store and GPU: another one is a restart.
  std::unique_ptr<Pipeline> MakePipeline(Store* store = nullptr) {
    PipelineOptions po;
    po.quick_budget_seconds = 2.0;
    return std::make_unique<Pipeline>(
        service_testing::FakeGpuDeps(&compiler_, store != nullptr ? store : store_.get(), &gpu_), po);
  }
  void Serve(const ServiceOptions& opts) {
    server_.reset();
    if (service_) service_->Drain();
    service_ = std::make_unique<KernelServiceImpl>(pipeline_.get(), opts);
    server_ = std::make_unique<LoopbackServer>(service_.get());
    stub_ = server_->stub();
  }
  void TearDown() override {
    server_.reset();
    if (service_) service_->Drain();
  }
  grpc::Status Compile(const v1::CompileRequest& req, v1::CompileResponse* resp, std::chrono::milliseconds deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    return stub_->Compile(&ctx, req, resp);
  }
  // Waits (bounded) until the store answers the request with a tuned plan.
  bool WaitForTuned(const v1::CompileRequest& req) {
    for (int i = 0; i < 200; ++i) {
      grpc::ClientContext ctx;
      v1::CompileResponse r;
      if (stub_->Lookup(&ctx, req, &r).ok() && r.plan().provenance().state() == v1::TUNE_STATE_TUNED) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits (bounded) until `runs` timing runs started and no build is left.
  bool WaitForTuningToEnd(int runs) {
    for (int i = 0; i < 200; ++i) {
      if (gpu_.runs.load() >= runs && service_->building() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  FakeCompiler compiler_;
  FakeGpu gpu_{std::chrono::milliseconds(1500)};
  std::string path_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<KernelServiceImpl> service_;
  std::unique_ptr<LoopbackServer> server_;
  v1::KernelService::Stub* stub_ = nullptr;
};

TEST_F(ColdStartTest, AShortDeadlineGetsTheHeuristicKernelNowAndTheNextCallerTheTunedOne) {
  v1::CompileResponse first;
  const auto t0 = Clock::now();
  grpc::Status s = Compile(Silu(1.5), &first, std::chrono::milliseconds(1000));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_LT(seconds, 1.0);  // Not after the 1.5 s a timing run takes.
  EXPECT_TRUE(first.tuning_in_background());
  EXPECT_EQ(first.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_THAT(first.plan().provenance().reason(), HasSubstr("deadline is shorter than tuning"));

  ASSERT_TRUE(WaitForTuned(Silu(1.5)));
  v1::CompileResponse next;
  ASSERT_TRUE(Compile(Silu(1.5), &next, std::chrono::seconds(30)).ok());
  EXPECT_EQ(next.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(next.plan().provenance().state(), v1::TUNE_STATE_TUNED);
  EXPECT_FALSE(next.tuning_in_background());
}

TEST_F(ColdStartTest, BackgroundPolicyAnswersAtOnceEvenWithTimeToWait) {
  v1::CompileResponse first;
  ASSERT_TRUE(Compile(Silu(2.5, /*background=*/true), &first, std::chrono::seconds(60)).ok());
  EXPECT_TRUE(first.tuning_in_background());
  EXPECT_EQ(first.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_THAT(first.plan().provenance().reason(), HasSubstr("asked for as background work"));
  ASSERT_TRUE(WaitForTuned(Silu(2.5)));
}

// One thread a pool, no queue: a second cold start finds the background
// pool busy and its answer says nothing tunes, rather than that tuning goes on.
TEST_F(ColdStartTest, AColdStartWhoseTuningIsRefusedSaysSo) {
  Serve({.job_threads = 1, .max_queued_jobs = 0});
  v1::CompileResponse first, second;
  ASSERT_TRUE(Compile(Silu(5.5, /*background=*/true), &first, std::chrono::seconds(60)).ok());
  EXPECT_TRUE(first.tuning_in_background());
  // The heuristic job's thread is free again; the tuning one still runs.
  for (int i = 0; i < 100 && service_->building() != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(service_->building(), 1);
  ASSERT_TRUE(Compile(Silu(6.5, /*background=*/true), &second, std::chrono::seconds(60)).ok());
  EXPECT_FALSE(second.tuning_in_background());
  EXPECT_EQ(second.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_THAT(second.plan().provenance().reason(), HasSubstr("queue is full"));
  ASSERT_TRUE(WaitForTuned(Silu(5.5)));
}

// A caller asking for background work that is not tuning (a heuristic
// request) is answered by the callers' pool, not queued behind tuning.
TEST_F(ColdStartTest, ABackgroundHeuristicRequestDoesNotWaitBehindTuning) {
  Serve({.job_threads = 1});
  v1::CompileResponse first;
  ASSERT_TRUE(Compile(Silu(7.5, /*background=*/true), &first, std::chrono::seconds(60)).ok());
  ASSERT_TRUE(first.tuning_in_background());  // The background thread tunes for 1.5 s.
  v1::CompileRequest heuristic = Silu(8.5, /*background=*/true);
  heuristic.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  v1::CompileResponse r;
  const auto t0 = Clock::now();
  ASSERT_TRUE(Compile(heuristic, &r, std::chrono::seconds(60)).ok());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
  EXPECT_EQ(r.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  ASSERT_TRUE(WaitForTuned(Silu(7.5)));
}

// The heuristic kernel failed its own check on the GPU and nothing else
// passed: the caller gets the error, and nothing is stored to serve later.
TEST_F(ColdStartTest, AKernelMeasuredWrongIsNeitherServedNorStored) {
  gpu_.wrong = true;
  v1::CompileResponse r;
  grpc::Status s = Compile(Silu(9.5), &r, std::chrono::seconds(60));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(s.error_message(), HasSubstr("failed on the GPU (wrong_result: y: max abs error 1"));
  grpc::ClientContext ctx;
  v1::CompileResponse stored;
  EXPECT_EQ(stub_->Lookup(&ctx, Silu(9.5), &stored).error_code(), grpc::StatusCode::NOT_FOUND);
  absl::StatusOr<std::vector<EntrySummary>> all = store_->List("", 0);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->empty());
}

// A cold start serves the heuristic kernel before any check; when its
// tuning then finds it wrong and nothing right, the stored answer goes, and
// the chain is refused (no tuning restarted) until a forced request retunes.
TEST_F(ColdStartTest, AHeuristicAnswerTuningFindsWrongIsWithdrawnAndRefused) {
  // Another kfused on the same store file, running all along.
  std::unique_ptr<Store> neighbour_store = *Store::Open({.path = path_});
  std::unique_ptr<Pipeline> neighbour = MakePipeline(neighbour_store.get());
  auto neighbour_refuses = [&] {
    EXPECT_TRUE(neighbour_store->PollInvalidations().ok());  // Its once-a-second look, now.
    absl::StatusOr<Prepared> p = neighbour->Prepare(Silu(10.5));
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() && !neighbour->MeasuredWrong(*p).ok();
  };
  EXPECT_FALSE(neighbour_refuses());
  gpu_.wrong = true;
  v1::CompileResponse first;
  ASSERT_TRUE(Compile(Silu(10.5, /*background=*/true), &first, std::chrono::seconds(60)).ok());
  ASSERT_TRUE(first.tuning_in_background());
  EXPECT_EQ(first.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  ASSERT_TRUE(WaitForTuningToEnd(1));
  const int runs = gpu_.runs.load();

  v1::CompileResponse again;
  grpc::Status s = Compile(Silu(10.5, /*background=*/true), &again, std::chrono::seconds(60));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(s.error_message(), HasSubstr("measured this chain's kernel wrong"));
  EXPECT_THAT(s.error_message(), HasSubstr("wrong_result: y: max abs error 1"));
  v1::CompileRequest heuristic = Silu(10.5);
  heuristic.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  EXPECT_EQ(Compile(heuristic, &again, std::chrono::seconds(60)).error_code(), grpc::StatusCode::INTERNAL);
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub_->Lookup(&ctx, heuristic, &again).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  absl::StatusOr<std::vector<EntrySummary>> all = store_->List("", 0);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->empty());  // The heuristic artifact and its decision.
  EXPECT_EQ(gpu_.runs.load(), runs);  // Nothing tuned again.
  // A restart keeps the refusal (the store holds it): the known-wrong kernel
  // is not the next cold start's answer.
  {
    std::unique_ptr<Pipeline> restarted = MakePipeline();
    absl::StatusOr<Prepared> p = restarted->Prepare(Silu(10.5));
    ASSERT_TRUE(p.ok()) << p.status();
    absl::Status refused = restarted->MeasuredWrong(*p);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInternal) << refused;
    EXPECT_THAT(refused.message(), HasSubstr("wrong_result: y: max abs error 1"));
  }
  EXPECT_TRUE(neighbour_refuses());  // The neighbour refuses it without a restart.

  // Fixed (a driver, a GPU swapped): a forced request tunes, and the chain serves.
  gpu_.wrong = false;
  v1::CompileRequest forced = Silu(10.5);
  forced.mutable_policy()->set_force(true);
  v1::CompileResponse tuned;
  ASSERT_TRUE(Compile(forced, &tuned, std::chrono::seconds(60)).ok());
  EXPECT_EQ(tuned.plan().provenance().state(), v1::TUNE_STATE_TUNED);
  ASSERT_TRUE(Compile(Silu(10.5), &again, std::chrono::seconds(60)).ok());
  EXPECT_EQ(again.plan().provenance().state(), v1::TUNE_STATE_TUNED);
  absl::StatusOr<std::vector<Store::Refusal>> kept = store_->Refusals();
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->empty());  // A restart serves it too.
  EXPECT_FALSE(neighbour_refuses());  // And so does the neighbour.
}

// A refusal the store could not keep (its write failed) still holds in this
// process when the store's refusals are read again.
TEST_F(ColdStartTest, ARefusalTheStoreCouldNotKeepOutlastsARereadOfTheStore) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TRIGGER refuse_refusals BEFORE INSERT ON refusals "
                         "BEGIN SELECT RAISE(FAIL, 'disk full (test)'); END;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  gpu_.wrong = true;
  ASSERT_TRUE(store_->PollInvalidations().ok());
  const uint64_t before = store_->invalidations();
  v1::CompileResponse first;
  ASSERT_TRUE(Compile(Silu(12.5, /*background=*/true), &first, std::chrono::seconds(60)).ok());
  ASSERT_TRUE(WaitForTuningToEnd(1));
  absl::StatusOr<std::vector<Store::Refusal>> kept = store_->Refusals();
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->empty());  // Its write failed.
  ASSERT_TRUE(store_->PollInvalidations().ok());
  ASSERT_GT(store_->invalidations(), before);  // The withdrawal's delete moved it: the next check reads again.
  absl::StatusOr<Prepared> p = pipeline_->Prepare(Silu(12.5));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(pipeline_->MeasuredWrong(*p).code(), absl::StatusCode::kInternal);
}

// A plan of several kernels tunes each in turn; every progress message says
// which kernel of how many its trial is of, each counting its own trials.
// A pipeline on a fake GPU, and a column softmax (a plan of three kernels)
// prepared for it, tuned quickly.
class PlanBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::CompileRequest req = service_testing::ColumnSoftmax();
    req.mutable_policy()->set_mode(v1::TuningPolicy::MODE_QUICK);
    absl::StatusOr<Prepared> p = pipeline_.Prepare(req);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->partition.kernels.size(), 3u);
    prepared_ = *std::move(p);
  }
  FakeCompiler compiler_;
  FakeGpu gpu_;
  std::unique_ptr<Store> store_ = *Store::Open({.path = TestStorePath()});
  Pipeline pipeline_{service_testing::FakeGpuDeps(&compiler_, store_.get(), &gpu_), PipelineOptions{}};
  Prepared prepared_;
};

TEST_F(PlanBuildTest, EachKernelOfAPlanIsNamedInItsTrials) {
  std::vector<v1::TuneProgress> seen;
  auto built = pipeline_.Build(prepared_, [&](const v1::TuneProgress& m) { seen.push_back(m); }, nullptr);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_FALSE(seen.empty());
  std::vector<uint32_t> kernels;
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].kernels(), 3u);
    if (i > 0) {
      EXPECT_GE(seen[i].kernel(), seen[i - 1].kernel());  // In turn.
    }
    if (kernels.empty() || kernels.back() != seen[i].kernel()) {
      kernels.push_back(seen[i].kernel());
      EXPECT_EQ(seen[i].done(), 1u);  // Each kernel counts its own.
    }
  }
  EXPECT_EQ(kernels, (std::vector<uint32_t>{0, 1, 2}));
}

// A bug a build meets (an exception, here from its progress callback) is
// that request's INTERNAL answer, naming it; the job's thread, and so the
// process, goes on, and the next build of the chain succeeds.
TEST_F(PlanBuildTest, AnExceptionInABuildIsAnsweredAsInternalAndTheNextBuildSucceeds) {
  auto thrown = pipeline_.Build(
      prepared_, [](const v1::TuneProgress&) { throw std::out_of_range("map::at"); }, nullptr);
  EXPECT_EQ(thrown.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(thrown.status().message(), HasSubstr("building the plan met a bug of ours: map::at"));
  auto built = pipeline_.Build(prepared_, nullptr, nullptr);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->plan().kernels_size(), 3);
}

// The seed is wrong but another candidate is right: the tuned kernel serves
// every request, a heuristic one too, and the heuristic answer is gone.
TEST_F(ColdStartTest, AHeuristicAnswerWrongBesideARightKernelGivesWayToIt) {
  gpu_.seed_wrong = true;
  v1::CompileResponse first;
  ASSERT_TRUE(Compile(Silu(11.5, /*background=*/true), &first, std::chrono::seconds(60)).ok());
  EXPECT_EQ(first.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  ASSERT_TRUE(WaitForTuned(Silu(11.5)));
  v1::CompileRequest heuristic = Silu(11.5);
  heuristic.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  v1::CompileResponse r;
  ASSERT_TRUE(Compile(heuristic, &r, std::chrono::seconds(60)).ok());
  EXPECT_EQ(r.plan().provenance().state(), v1::TUNE_STATE_TUNED);
  absl::StatusOr<Prepared> p = pipeline_->Prepare(Silu(11.5));
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::optional<std::string>> stored = store_->GetArtifact(p->heuristic_key);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_FALSE(stored->has_value());  // The heuristic answer, withdrawn.
  stored = store_->GetArtifact(p->key);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(stored->has_value());  // The tuned one.
}

// Forcing a retune of such a chain when the caller cannot wait for it: the
// retune runs, and meanwhile the caller is told so, not handed the kernel
// known wrong (nor is it stored again).
TEST_F(ColdStartTest, AForcedRetuneThatCannotWaitIsNotAnsweredWithTheWrongKernel) {
  gpu_.wrong = true;
  v1::CompileResponse r;
  EXPECT_EQ(Compile(Silu(12.5), &r, std::chrono::seconds(60)).error_code(), grpc::StatusCode::INTERNAL);
  gpu_.wrong = false;
  v1::CompileRequest forced = Silu(12.5, /*background=*/true);
  forced.mutable_policy()->set_force(true);
  grpc::Status s = Compile(forced, &r, std::chrono::seconds(60));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("the forced retune goes on in the background"));
  v1::CompileRequest heuristic = Silu(12.5);
  heuristic.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  heuristic.mutable_policy()->set_force(true);
  EXPECT_EQ(Compile(heuristic, &r, std::chrono::seconds(60)).error_code(), grpc::StatusCode::INTERNAL);
  ASSERT_TRUE(WaitForTuned(Silu(12.5)));  // The retune ran and cleared the refusal.
  ASSERT_TRUE(Compile(Silu(12.5), &r, std::chrono::seconds(60)).ok());
  EXPECT_EQ(r.plan().provenance().state(), v1::TUNE_STATE_TUNED);
}

TEST_F(ColdStartTest, ACallerWithTimeWaitsForTheTunedKernel) {
  v1::CompileResponse r;
  ASSERT_TRUE(Compile(Silu(3.5), &r, std::chrono::seconds(60)).ok());
  EXPECT_FALSE(r.tuning_in_background());
  EXPECT_EQ(r.plan().provenance().state(), v1::TUNE_STATE_TUNED);
  EXPECT_EQ(r.cache(), v1::CACHE_OUTCOME_MISS);
}

// A chain tuned, then what Prepare gives it once the generator's version
// moves and its variant schema does not: another artifact key, the same
// decision key.
struct NextGenerator {
  Prepared first, next;
  v1::CompileResponse tuned;
  int runs = 0;  // The GPU's runs after the first build.
};
NextGenerator TuneThenMoveTheGenerator(Pipeline& pipeline, FakeGpu& gpu, double scale) {
  NextGenerator g;
  absl::StatusOr<Prepared> p = pipeline.Prepare(Silu(scale));
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return g;
  EXPECT_TRUE(p->can_tune);
  g.first = *p;
  auto tuned = pipeline.Build(*p, nullptr, nullptr);
  EXPECT_TRUE(tuned.ok()) << tuned.status();
  if (tuned.ok()) g.tuned = *tuned;
  EXPECT_EQ(g.tuned.plan().provenance().state(), v1::TUNE_STATE_TUNED);
  g.runs = gpu.runs.load();
  EXPECT_GT(g.runs, 0);
  g.next = *p;
  g.next.key.generator += "-next";
  for (CacheKey& k : g.next.lookup_keys) k.generator += "-next";
  EXPECT_NE(g.next.key.ArtifactKey(), p->key.ArtifactKey());
  return g;
}

TEST_F(ColdStartTest, ANewGeneratorVersionWithTheSameVariantSchemaReusesTheDecision) {
  NextGenerator g = TuneThenMoveTheGenerator(*pipeline_, gpu_, 4.5);
  ASSERT_GT(g.runs, 0);
  auto miss = pipeline_->Lookup(g.next);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  auto rebuilt = pipeline_->Build(g.next, nullptr, nullptr);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  // Recompiled and checked once (untimed), not retuned.
  EXPECT_EQ(gpu_.runs.load(), g.runs + 1);
  EXPECT_EQ(gpu_.checks.load(), 1);
  EXPECT_EQ(rebuilt->plan().provenance().state(), v1::TUNE_STATE_TUNED);
  ASSERT_EQ(rebuilt->plan().kernels_size(), g.tuned.plan().kernels_size());
  EXPECT_EQ(rebuilt->plan().kernels(0).variant().DebugString(), g.tuned.plan().kernels(0).variant().DebugString());

  // A variant schema change is a different decision key: retuned.
  Prepared schema = g.next;
  schema.decision_key.generator += "-schema2";
  schema.key.generator += "-again";
  ASSERT_TRUE(pipeline_->Build(schema, nullptr, nullptr).ok());
  EXPECT_GT(gpu_.runs.load(), g.runs + 1);
}

// A plan names the sizes each kernel's check passed at, by the request's
// symbol names, whether built now or reused.
TEST_F(ColdStartTest, APlanSaysWhereItsKernelWasChecked) {
  auto request = [](const std::string& symbol) { return SiluOver(symbol, 7.5); };
  auto sizes = [](const v1::Kernel& k) {
    std::vector<std::string> out;
    for (const v1::SymbolSizes& s : k.checked_at())
      for (const auto& [name, value] : s.sizes()) out.push_back(absl::StrCat(name, "=", value));
    return out;
  };
  absl::StatusOr<Prepared> p = pipeline_->Prepare(request("tokens"));
  ASSERT_TRUE(p.ok()) << p.status();
  auto built = pipeline_->Build(*p, nullptr, nullptr);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->plan().provenance().state(), v1::TUNE_STATE_TUNED);
  EXPECT_THAT(sizes(built->plan().kernels(0)), ElementsAre("tokens=1024", "tokens=769", "tokens=3"));
  v1::CompileResponse again;
  ASSERT_TRUE(Compile(request("rows"), &again, std::chrono::seconds(60)).ok());
  EXPECT_EQ(again.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_THAT(sizes(again.plan().kernels(0)), ElementsAre("rows=1024", "rows=769", "rows=3"));
}

// Callers that differ only in their symbols' names share one tuning job.
// What it says as it goes (a check that failed at another size quotes that
// size's symbol) and how it ends reach each caller in its own names, as
// does the refusal a later caller meets.
TEST_F(ColdStartTest, CallersReadTheirOwnSymbolNamesInATuningJobsMessages) {
  gpu_.wrong_untimed = true;  // Every check at another size fails.
  struct Heard {
    std::string progress;  // Every trial message.
    std::string text;      // Those, then the stream's end.
    grpc::Status end;
  };
  auto tune = [&](const std::string& symbol, double scale, Heard* heard) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = stub_->Tune(&ctx, SiluOver(symbol, scale));
    v1::TuneProgress m;
    while (reader->Read(&m)) absl::StrAppend(&heard->progress, m.trial().message(), "\n");
    heard->end = reader->Finish();
    heard->text = absl::StrCat(heard->progress, heard->end.error_message());
  };
  Heard alone;
  tune("n", 9.5, &alone);
  const int runs_alone = gpu_.runs.exchange(0);
  Heard first, joined;
  std::thread t([&] { tune("tokens", 8.5, &first); });
  while (gpu_.runs.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  tune("rows", 8.5, &joined);
  t.join();
  EXPECT_EQ(gpu_.runs.load(), runs_alone);  // One job.
  EXPECT_THAT(first.text, HasSubstr("\"tokens\"="));
  EXPECT_THAT(joined.progress, HasSubstr("\"rows\"="));  // It joined the job, and heard it.
  for (const char* other : {"\"s0\"", "\"rows\""}) EXPECT_THAT(first.text, Not(HasSubstr(other)));
  for (const char* other : {"\"s0\"", "\"tokens\""}) EXPECT_THAT(joined.text, Not(HasSubstr(other)));
  EXPECT_EQ(first.end.error_code(), joined.end.error_code());
  // A later caller is refused the chain measured wrong in its own names too.
  v1::CompileResponse r;
  grpc::Status later = Compile(SiluOver("cols", 8.5), &r, std::chrono::seconds(60));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(later.error_message(), HasSubstr("\"cols\"="));
  for (const char* other : {"\"s0\"", "\"tokens\""}) EXPECT_THAT(later.error_message(), Not(HasSubstr(other)));
}

// The decision's winner, built by the new generator, computes the wrong
// answer: it is not served; the chain is tuned afresh.
TEST_F(ColdStartTest, ARecompiledDecisionThatFailsItsCheckIsRetuned) {
  NextGenerator g = TuneThenMoveTheGenerator(*pipeline_, gpu_, 5.5);
  ASSERT_GT(g.runs, 0);
  gpu_.wrong_untimed = true;
  auto rebuilt = pipeline_->Build(g.next, nullptr, nullptr);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(gpu_.checks.load(), 1);
  EXPECT_GE(gpu_.runs.load(), g.runs + 2);  // The check, then tuning.
  EXPECT_EQ(rebuilt->plan().provenance().state(), v1::TUNE_STATE_TUNED);
}

// A check the GPU cannot run proves nothing: the decision serves as it did
// before checks were made.
TEST_F(ColdStartTest, ARecompiledDecisionTheGpuCannotCheckIsServedAsStored) {
  NextGenerator g = TuneThenMoveTheGenerator(*pipeline_, gpu_, 6.5);
  ASSERT_GT(g.runs, 0);
  gpu_.gone = true;
  auto rebuilt = pipeline_->Build(g.next, nullptr, nullptr);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(gpu_.runs.load(), g.runs + 1);
  EXPECT_EQ(rebuilt->plan().provenance().state(), v1::TUNE_STATE_TUNED);
  EXPECT_EQ(rebuilt->plan().kernels(0).variant().DebugString(), g.tuned.plan().kernels(0).variant().DebugString());
}

// A request that asks for no tuning (MODE_HEURISTIC) reads the decisions of
// its own depth only, so a tuned decision recompiled for a new generator
// never puts it on the GPU, not even for the check.
TEST_F(ColdStartTest, AHeuristicRequestAfterANewGeneratorDoesNotReachTheGpu) {
  NextGenerator g = TuneThenMoveTheGenerator(*pipeline_, gpu_, 7.5);
  ASSERT_GT(g.runs, 0);
  v1::CompileRequest req = Silu(7.5);
  req.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  absl::StatusOr<Prepared> p = pipeline_->Prepare(req);
  ASSERT_TRUE(p.ok()) << p.status();
  p->key.generator += "-next";
  for (CacheKey& k : p->lookup_keys) k.generator += "-next";
  auto built = pipeline_->Build(*p, nullptr, nullptr);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(gpu_.runs.load(), g.runs);
  EXPECT_EQ(gpu_.checks.load(), 0);
  EXPECT_EQ(built->plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
}

}  // namespace
}  // namespace kfuse
