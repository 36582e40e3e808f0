// The search loop with a fake runner (scripted outcomes and timings) and a
// fake compiler; the generator is the real pointwise one. No GPU needed.
#include "tuner/search.h"

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "codegen/generators.h"
#include "codegen/matmul_test_chains.h"
#include "codegen/partition.h"
#include "codegen/pointwise.h"
#include "codegen/reduce_test_chains.h"
#include "codegen/row_test_chains.h"
#include "codegen/validate.h"
#include "core/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/search_test_chains.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

// bench/gpu/cases/three_outputs_f32: relu(x), sigmoid(x), x * x of one f32 x.
Fixture ThreeOutputs(int64_t n = int64_t{1} << 27) {
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(n)}});
  c.outputs.push_back(c.AddOp(OpKind::kRelu, {x}));
  c.outputs.push_back(c.AddOp(OpKind::kSigmoid, {x}));
  c.outputs.push_back(c.AddOp(OpKind::kMul, {x, x}));
  c.input_names = {"x"};
  c.output_names = {"relu", "sigmoid", "square"};
  absl::StatusOr<Chain> v = Validate(c);
  KFUSE_CHECK(v.ok());
  absl::StatusOr<Partition> p = PartitionChain(*v);
  KFUSE_CHECK(p.ok() && p->kernels.size() == 1);
  return Fixture{*v, p->kernels[0]};
}

class FakeCompiler : public Compiler {
 public:
  absl::StatusOr<CompiledKernel> Compile(const KernelSpec& spec, const CompileOptions& opts,
                                         const std::atomic<bool>*) override {
    calls_++;
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    if (fail_.count(spec.source))
      return absl::InternalError("ptxas: too many resources requested for launch");
    CompiledKernel k;
    k.spec = spec;
    k.arch = opts.arch;
    k.cubin = "fake cubin for " + spec.entry;
    k.compile_seconds = 0.001;
    return k;
  }
  std::string Version() const override { return "fake-1"; }

  std::set<std::string> fail_;  // Sources that fail to compile.
  int delay_ms_ = 0;
  std::atomic<int> calls_{0};
};

// Answers each candidate with the scripted outcome and time of its variant
// (default: OK, 1 ms), or where sized_script_ has one for the task's symbol
// values, that; records the tasks it saw.
class FakeRunner : public Runner {
 public:
  struct Script {
    Outcome outcome = Outcome::kOk;
    double seconds = 1e-3;
  };
  absl::StatusOr<std::vector<Trial>> Run(
      const CheckTask& task, const std::function<void(const Trial&)>& on_trial) override {
    last_task_ = task;
    tasks_.push_back(task);
    run_at_ = std::chrono::steady_clock::now();
    if (!fail_.ok()) return fail_;
    if (!fail_at_.empty() && task.symbol_values == fail_at_)
      return absl::UnavailableError("the GPU fell off the bus");
    if (!slow_at_.empty() && task.symbol_values == slow_at_)
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    std::vector<Trial> out;
    double spent = 0;  // Simulated, when cost_seconds_ > 0: WorkerRunner's budget rule.
    for (const CompiledKernel& k : task.candidates) {
      Script s;
      auto it = script_.find(k.spec.variant.ToString());
      if (it != script_.end()) s = it->second;
      auto sized = sized_script_.find({k.spec.variant.ToString(), task.symbol_values});
      if (sized != sized_script_.end()) s = sized->second;
      Trial t;
      t.variant = k.spec.variant;
      if (cost_seconds_ > 0 && !out.empty() && task.budget_seconds > 0 &&
          spent >= task.budget_seconds) {
        t.outcome = Outcome::kSkipped;
        t.message = "tuning budget spent before this candidate started";
        if (on_trial) on_trial(t);
        out.push_back(t);
        continue;
      }
      spent += cost_seconds_;
      t.outcome = s.outcome;
      t.median_seconds = s.seconds;
      t.samples_seconds = {s.seconds};
      if (on_trial) on_trial(t);
      out.push_back(t);
    }
    if (!short_at_.empty() && task.symbol_values == short_at_ && !out.empty()) out.pop_back();
    return out;
  }
  absl::StatusOr<DeviceFingerprint> Device() override { return DeviceFingerprint{}; }
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* /*cancel*/) override { return NominalCeilings(90); }

  std::map<std::string, Script> script_;
  std::map<std::pair<std::string, std::vector<int64_t>>, Script> sized_script_;
  absl::Status fail_;
  std::vector<int64_t> fail_at_;  // Non-empty: Run at these symbol values fails.
  std::vector<int64_t> slow_at_;  // Non-empty: Run at these symbol values takes 0.6 s.
  std::vector<int64_t> short_at_;  // Non-empty: Run there answers one trial fewer.
  double cost_seconds_ = 0;  // > 0: each run candidate spends this much budget.
  CheckTask last_task_;
  std::vector<CheckTask> tasks_;
  std::chrono::steady_clock::time_point run_at_;
};

std::string FastSource(const Fixture& f, const Variant& v) {
  absl::StatusOr<KernelSpec> s = EmitPointwise(f.chain, f.group, v, Numerics::kFast);
  KFUSE_CHECK(s.ok());
  return s->source;
}

TuneOptions Opts(TuneMode mode) {
  TuneOptions o;
  o.mode = mode;
  o.budget_seconds = 30;
  o.arch = "sm_90a";
  o.compile_threads = 2;
  return o;
}

TEST(TuneKernelTest, FastestOkTrialWins) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  absl::StatusOr<std::vector<Variant>> cands =
      CandidateVariants(f.chain, f.group, TuneMode::kFull, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok());
  ASSERT_GE(cands->size(), 3u);
  const Variant winner = (*cands)[2];
  runner.script_[winner.ToString()] = {Outcome::kOk, 0.2e-3};
  runner.script_[(*cands)[1].ToString()] = {Outcome::kOk, 0.5e-3};

  int progress_calls = 0;
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, Opts(TuneMode::kFull), compiler,
                                            &runner, [&](const Trial&, int done, int total) {
                                              ++progress_calls;
                                              EXPECT_LE(done, total);
                                            });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  EXPECT_EQ(r->best, winner);
  EXPECT_EQ(r->kernel.spec.variant, winner);
  EXPECT_EQ(r->trials.size(), cands->size());
  EXPECT_EQ(progress_calls, static_cast<int>(cands->size()));
  EXPECT_DOUBLE_EQ(r->report.measured_seconds, 0.2e-3);
  EXPECT_GT(r->report.fraction_of_roofline, 0);
  EXPECT_EQ(r->report.bound, Bound::kMemory);

  // The runner saw one kernel's contract: 3 f32 inputs, 1 f32 output.
  const CheckTask& task = runner.last_task_;
  ASSERT_EQ(task.inputs.size(), 3u);
  ASSERT_EQ(task.outputs.size(), 1u);
  EXPECT_EQ(task.inputs[0].elements, 1 << 24);
  EXPECT_EQ(task.outputs[0].dtype, DType::kF32);
  EXPECT_EQ(task.candidates[0].spec.variant, r->trials[0].variant);
  EXPECT_FALSE(task.reference64.cubin.empty());
  EXPECT_FALSE(task.eager.cubin.empty());
  EXPECT_NE(task.reference64.spec.source, task.candidates[0].spec.source);
}

TEST(TuneKernelTest, ACancelledJobNeverReachesTheGpu) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  std::atomic<bool> cancel{true};
  TuneOptions opts = Opts(TuneMode::kQuick);
  opts.cancel = &cancel;
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, opts, compiler, &runner);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(runner.run_at_, std::chrono::steady_clock::time_point{});
}

TEST(TuneKernelTest, WrongOrFaultingVariantNeverWins) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok());
  ASSERT_GE(cands->size(), 4u);
  runner.script_[(*cands)[1].ToString()] = {Outcome::kWrongResult, 1e-6};
  runner.script_[(*cands)[2].ToString()] = {Outcome::kFault, 2e-6};
  runner.script_[(*cands)[3].ToString()] = {Outcome::kOk, 0.9e-3};
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned);
  EXPECT_EQ(r->best, (*cands)[3]);
}

// The relu chain tuned with every candidate judged wrong but the seed,
// whose trial ends as `seed`.
struct NonePassing {
  std::vector<Variant> cands;
  absl::StatusOr<TuneResult> result;
};
NonePassing TuneWithNonePassing(Outcome seed) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  NonePassing out;
  absl::StatusOr<std::vector<Variant>> cands =
      CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  if (!cands.ok()) {
    out.result = cands.status();
    return out;
  }
  out.cands = *std::move(cands);
  for (const Variant& v : out.cands) runner.script_[v.ToString()] = {Outcome::kWrongResult, 1e-6};
  runner.script_[out.cands[0].ToString()] = {seed, seed == Outcome::kSkipped ? 0 : 1e-6};
  out.result = TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  return out;
}

TEST(TuneKernelTest, NoPassingVariantGivesUntunedSeed) {
  // The seed was not run (out of budget): nothing says it is wrong.
  NonePassing t = TuneWithNonePassing(Outcome::kSkipped);
  const absl::StatusOr<TuneResult>& r = t.result;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tuned);
  EXPECT_FALSE(r->seed_failed);
  EXPECT_TRUE(r->seed_failure.empty());
  EXPECT_EQ(r->best, t.cands[0]);
  EXPECT_EQ(r->kernel.spec.variant, t.cands[0]);
  EXPECT_EQ(r->trials.size(), t.cands.size());
  EXPECT_THAT(r->untuned_reason, HasSubstr("no candidate passed the check"));
  EXPECT_THAT(r->untuned_reason, HasSubstr("wrong_result"));
  EXPECT_EQ(r->report.measured_seconds, 0);
}

TEST(TuneKernelTest, ASeedThatFailedItsCheckIsMarkedSo) {
  NonePassing t = TuneWithNonePassing(Outcome::kWrongResult);
  const absl::StatusOr<TuneResult>& r = t.result;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tuned);
  EXPECT_TRUE(r->seed_failed);
  EXPECT_THAT(r->untuned_reason,
              HasSubstr("the heuristic variant " + t.cands[0].ToString() + " failed on the GPU (wrong_result"));
  EXPECT_THAT(r->seed_failure, HasSubstr("wrong_result"));
}

// Another candidate passed: the tuned kernel serves, and the seed's failure
// is still reported, since an answer given without tuning is that seed.
TEST(TuneKernelTest, ASeedThatFailedBesideAPassingCandidateIsReported) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  absl::StatusOr<std::vector<Variant>> cands =
      CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok()) << cands.status();
  ASSERT_GE(cands->size(), 2u);
  runner.script_[(*cands)[0].ToString()] = {Outcome::kLaunchError, 1e-6};
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned);
  EXPECT_FALSE(r->seed_failed);
  EXPECT_NE(r->best, (*cands)[0]);
  EXPECT_THAT(r->seed_failure, HasSubstr("launch_error"));
}

// A kernel serves every size of its symbols: what passed at the bucket (n
// hinted 1000, tuned at 1024) is checked, untimed, at an odd size near three
// quarters of it and at a few elements before it can win.
TEST(TuneKernelTest, ASymbolicKernelIsCheckedAtOtherSizesBeforeItWins) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kFull, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok()) << cands.status();
  ASSERT_GE(cands->size(), 3u);
  runner.script_[(*cands)[2].ToString()] = {Outcome::kOk, 0.2e-3};
  runner.script_[(*cands)[1].ToString()] = {Outcome::kOk, 0.5e-3};
  runner.sized_script_[{(*cands)[2].ToString(), {769}}] = {Outcome::kWrongResult, 0.2e-3};
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kFull), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  EXPECT_EQ(r->best, (*cands)[1]);
  EXPECT_DOUBLE_EQ(r->report.measured_seconds, 0.5e-3);
  auto fastest = std::find_if(r->trials.begin(), r->trials.end(),
                              [&](const Trial& t) { return t.variant == (*cands)[2]; });
  ASSERT_NE(fastest, r->trials.end());
  EXPECT_EQ(fastest->outcome, Outcome::kWrongResult);
  EXPECT_THAT(fastest->message, HasSubstr("at \"n\"=769 (passed at \"n\"=1024)"));
  EXPECT_EQ(fastest->symbol_values, (std::vector<int64_t>{769}));  // Where its repro replays.
  EXPECT_EQ(r->checked_sizes, (std::vector<std::vector<int64_t>>{{1024}, {769}, {3}}));
  EXPECT_TRUE(r->seed_failure.empty());

  ASSERT_EQ(runner.tasks_.size(), 3u);
  EXPECT_EQ(runner.tasks_[0].symbol_values, (std::vector<int64_t>{1024}));
  for (int i = 1; i < 3; ++i) {
    const CheckTask& t = runner.tasks_[i];
    const int64_t n = i == 1 ? 769 : 3;
    EXPECT_EQ(t.symbol_values, (std::vector<int64_t>{n}));
    ASSERT_EQ(t.inputs.size(), 3u);
    EXPECT_EQ(t.inputs[0].elements, n);
    ASSERT_EQ(t.outputs.size(), 1u);
    EXPECT_EQ(t.outputs[0].elements, n);
    EXPECT_FALSE(t.timing.flush_l2);
    EXPECT_EQ(t.timing.repeats, 1);
    EXPECT_EQ(t.budget_seconds, 0);  // Every candidate sent is checked.
    EXPECT_EQ(t.reference64.spec.source, runner.tasks_[0].reference64.spec.source);
  }
  // The seed and the three fastest; what failed at 769 is not sent again.
  EXPECT_EQ(runner.tasks_[1].candidates.size(), 4u);
  EXPECT_EQ(runner.tasks_[1].candidates[0].spec.variant, (*cands)[0]);
  EXPECT_EQ(runner.tasks_[2].candidates.size(), 3u);
  for (const CompiledKernel& k : runner.tasks_[2].candidates) EXPECT_NE(k.spec.variant, (*cands)[2]);
}

TEST(TuneKernelTest, AKernelWithoutSymbolsIsCheckedOnce) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned);
  EXPECT_EQ(runner.tasks_.size(), 1u);
  EXPECT_TRUE(r->checked_sizes.empty());
}

// The seed and the three fastest all wrong at 769: the rest are checked.
TEST(TuneKernelTest, WhenTheFastestFailAtOtherSizesTheRestAreChecked) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kFull, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok()) << cands.status();
  ASSERT_GE(cands->size(), 6u);
  for (size_t i = 0; i < cands->size(); ++i)
    runner.script_[(*cands)[i].ToString()] = {Outcome::kOk, 1e-3 * (i + 1)};
  for (size_t i = 0; i < 4; ++i)
    runner.sized_script_[{(*cands)[i].ToString(), {769}}] = {Outcome::kWrongResult, 0};
  runner.sized_script_[{(*cands)[4].ToString(), {3}}] = {Outcome::kLaunchError, 0};
  // Progress: each trial at the bucket, then again each that failed later.
  std::vector<Trial> reported;
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, Opts(TuneMode::kFull), compiler, &runner,
                                            [&](const Trial& t, int, int) { reported.push_back(t); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  EXPECT_EQ(r->best, (*cands)[5]);
  EXPECT_THAT(r->seed_failure, HasSubstr("wrong_result: at \"n\"=769"));
  ASSERT_EQ(reported.size(), cands->size() + 5);
  for (size_t i = 0; i < cands->size(); ++i) EXPECT_EQ(reported[i].outcome, Outcome::kOk) << i;
  for (size_t i = 0; i < 5; ++i) {
    const Trial& again = reported[cands->size() + i];
    EXPECT_EQ(again.variant, (*cands)[i]);
    EXPECT_EQ(again.outcome, i < 4 ? Outcome::kWrongResult : Outcome::kLaunchError);
    EXPECT_EQ(again.symbol_values, (std::vector<int64_t>{i < 4 ? 769 : 3}));
    EXPECT_THAT(again.message, HasSubstr("(passed at \"n\"=1024)"));
  }
  EXPECT_FALSE(r->seed_failed);
  // The bucket; the first four at 769 (none left for 3); the rest at both.
  ASSERT_EQ(runner.tasks_.size(), 4u);
  EXPECT_EQ(runner.tasks_[1].candidates.size(), 4u);
  EXPECT_EQ(runner.tasks_[2].symbol_values, (std::vector<int64_t>{769}));
  EXPECT_EQ(runner.tasks_[2].candidates.size(), cands->size() - 4);
  EXPECT_EQ(runner.tasks_[3].symbol_values, (std::vector<int64_t>{3}));
}

// n hinted 1000 (tuned at 1024), every candidate passing there, the seed
// slowest (1 s), the others at 1, 2, 3 ... ms, the three fastest wrong at 769.
std::vector<Variant> SlowSeedAndTheFastestWrongAt769(const Fixture& f, FakeRunner& runner) {
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kFull, Bound::kMemory, 48);
  KFUSE_CHECK(cands.ok() && cands->size() >= 6);
  runner.script_[(*cands)[0].ToString()] = {Outcome::kOk, 1.0};
  for (size_t i = 1; i < cands->size(); ++i)
    runner.script_[(*cands)[i].ToString()] = {Outcome::kOk, 1e-3 * i};
  for (size_t i = 1; i < 4; ++i)
    runner.sized_script_[{(*cands)[i].ToString(), {769}}] = {Outcome::kWrongResult, 0};
  return *cands;
}

// The three fastest wrong at 769 and the seed slowest: a candidate faster
// than the seed, not among the first checked, is checked before the seed
// can win.
TEST(TuneKernelTest, TheSeedDoesNotWinPastAFasterCandidateNotYetChecked) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  const std::vector<Variant> cands = SlowSeedAndTheFastestWrongAt769(f, runner);
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kFull), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  EXPECT_EQ(r->best, cands[4]);
  EXPECT_TRUE(r->seed_failure.empty());
}

// The budget is spent by the first checks: the rest are not checked, and
// the fastest of those checked that passed everywhere wins.
TEST(TuneKernelTest, PastTheBudgetTheFastestCheckedWins) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  const std::vector<Variant> cands = SlowSeedAndTheFastestWrongAt769(f, runner);
  runner.slow_at_ = {769};
  TuneOptions opts = Opts(TuneMode::kFull);
  opts.budget_seconds = 0.5;
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, opts, compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  EXPECT_EQ(r->best, cands[0]);
  ASSERT_EQ(runner.tasks_.size(), 3u);  // The bucket, then the first four at 769 and the seed at 3.
  EXPECT_EQ(runner.tasks_[2].candidates.size(), 1u);
}

// A candidate the runner gave no verdict on at another size is not known
// right: it cannot win, and its trial says so.
TEST(TuneKernelTest, ACandidateWithoutAVerdictAtAnotherSizeDoesNotWin) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  const std::vector<Variant> cands = SlowSeedAndTheFastestWrongAt769(f, runner);
  runner.sized_script_.erase({cands[3].ToString(), {769}});  // The batch's last: no verdict.
  runner.short_at_ = {769};
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, Opts(TuneMode::kFull), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  EXPECT_EQ(r->best, cands[4]);
  auto third = std::find_if(r->trials.begin(), r->trials.end(),
                            [&](const Trial& t) { return t.variant == cands[3]; });
  ASSERT_NE(third, r->trials.end());
  EXPECT_EQ(third->outcome, Outcome::kSkipped);
  EXPECT_THAT(third->message, HasSubstr("at \"n\"=769 (passed at \"n\"=1024): the runner gave no verdict"));
}

// The seed failed at 769, then the GPU could not run the check at 3: no
// kernel is known right, and the seed is known wrong.
TEST(TuneKernelTest, ASeedWrongAtAnotherSizeIsMarkedSoWhenTheNextCheckCannotRun) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok()) << cands.status();
  runner.sized_script_[{(*cands)[0].ToString(), {769}}] = {Outcome::kWrongResult, 0};
  runner.fail_at_ = {3};
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tuned);
  EXPECT_TRUE(r->seed_failed);
  EXPECT_THAT(r->untuned_reason, HasSubstr("failed on the GPU (wrong_result: at \"n\"=769"));
  EXPECT_THAT(r->untuned_reason, HasSubstr("the check at \"n\"=3 failed on the GPU"));
}

TEST(TuneKernelTest, NoKernelRightAtEverySizeLeavesTheSeedUntunedAndMarked) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok()) << cands.status();
  for (const Variant& v : *cands) runner.sized_script_[{v.ToString(), {3}}] = {Outcome::kWrongResult, 0};
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tuned);
  EXPECT_TRUE(r->seed_failed);
  EXPECT_EQ(r->kernel.spec.variant, (*cands)[0]);
  EXPECT_THAT(r->untuned_reason, HasSubstr("at \"n\"=3"));
  EXPECT_EQ(r->report.measured_seconds, 0);
}

TEST(TuneKernelTest, ACheckAtAnotherSizeTheGpuCannotRunLeavesItUntuned) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  runner.fail_at_ = {769};
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tuned);
  EXPECT_FALSE(r->seed_failed);
  EXPECT_THAT(r->untuned_reason,
              HasSubstr("tuning failed on the GPU: the check at \"n\"=769 failed on the GPU"));
}

// A stored decision's winner, compiled: what CheckKernel is given. Not the
// seed: its yardsticks are the seed's, as in tuning.
CompiledKernel Compiled(const Fixture& f, FakeCompiler& compiler) {
  absl::StatusOr<std::vector<Variant>> v =
      CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48, 90);
  KFUSE_CHECK(v.ok() && v->size() >= 2);
  absl::StatusOr<KernelSpec> spec = EmitPointwise(f.chain, f.group, (*v)[1], Numerics::kFast);
  KFUSE_CHECK(spec.ok());
  CompileOptions copts;
  copts.arch = "sm_90a";
  absl::StatusOr<CompiledKernel> k = compiler.Compile(*spec, copts, nullptr);
  KFUSE_CHECK(k.ok());
  return *k;
}

TEST(CheckKernelTest, ChecksAtTheBucketThenAtOtherSizesUntimed) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  FakeRunner runner;
  const CompiledKernel k = Compiled(f, compiler);
  absl::StatusOr<Trial> t = CheckKernel(f.chain, f.group, k, Opts(TuneMode::kQuick), compiler, runner);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->outcome, Outcome::kOk) << t->message;
  EXPECT_EQ(t->variant, k.spec.variant);
  ASSERT_EQ(runner.tasks_.size(), 3u);
  const int64_t sizes[] = {1024, 769, 3};
  for (int i = 0; i < 3; ++i) {
    const CheckTask& task = runner.tasks_[i];
    EXPECT_EQ(task.symbol_values, (std::vector<int64_t>{sizes[i]}));
    ASSERT_EQ(task.candidates.size(), 1u);
    EXPECT_EQ(task.candidates[0].spec.source, k.spec.source);
    EXPECT_EQ(task.inputs[0].elements, sizes[i]);
    EXPECT_FALSE(task.timing.flush_l2);
    EXPECT_EQ(task.timing.repeats, 1);
    const Variant seed = *SeedVariant(f.chain, f.group, 90);
    EXPECT_NE(k.spec.variant, seed);
    EXPECT_EQ(task.reference64.spec.variant, seed);
    EXPECT_EQ(task.eager.spec.variant, seed);
    EXPECT_NE(task.reference64.spec.source, task.eager.spec.source);
  }
}

TEST(CheckKernelTest, AFailureNamesTheSizes) {
  Fixture f = ReluChain(-1000);
  FakeCompiler compiler;
  const CompiledKernel k = Compiled(f, compiler);
  {
    FakeRunner runner;
    runner.sized_script_[{k.spec.variant.ToString(), {3}}] = {Outcome::kWrongResult, 0};
    absl::StatusOr<Trial> t = CheckKernel(f.chain, f.group, k, Opts(TuneMode::kQuick), compiler, runner);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->outcome, Outcome::kWrongResult);
    EXPECT_THAT(t->message, HasSubstr("at \"n\"=3 (passed at \"n\"=1024)"));
  }
  {
    FakeRunner runner;
    runner.sized_script_[{k.spec.variant.ToString(), {1024}}] = {Outcome::kLaunchError, 0};
    absl::StatusOr<Trial> t = CheckKernel(f.chain, f.group, k, Opts(TuneMode::kQuick), compiler, runner);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->outcome, Outcome::kLaunchError);
    EXPECT_THAT(t->message, HasSubstr("at \"n\"=1024: "));
    EXPECT_EQ(runner.tasks_.size(), 1u);  // No other size once the bucket failed.
  }
  {
    FakeRunner runner;
    runner.fail_at_ = {769};
    absl::StatusOr<Trial> t = CheckKernel(f.chain, f.group, k, Opts(TuneMode::kQuick), compiler, runner);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable) << t.status();
    EXPECT_THAT(t.status().message(), HasSubstr("the check at \"n\"=769"));
  }
}

TEST(TuneKernelTest, RunnerFailureGivesUntunedSeed) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  runner.fail_ = absl::UnavailableError("the GPU fell off the bus");
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tuned);
  EXPECT_THAT(r->untuned_reason, HasSubstr("fell off the bus"));
  EXPECT_FALSE(r->kernel.cubin.empty());
}

TEST(TuneKernelTest, NoRunnerGivesHeuristicUntuned) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kFull), compiler, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tuned);
  EXPECT_EQ(r->untuned_reason, "no GPU on this server");
  EXPECT_EQ(r->best, PointwiseHeuristic(f.chain, f.group));
  EXPECT_EQ(compiler.calls_.load(), 1);
  EXPECT_TRUE(r->trials.empty());
  EXPECT_GT(r->report.predicted_seconds, 0);
  EXPECT_EQ(r->report.ceilings_source, "nominal sm_90");

  FakeRunner runner;
  r = TuneKernel(f.chain, f.group, Opts(TuneMode::kHeuristic), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->untuned_reason, "policy: heuristic");
}

TEST(TuneKernelTest, BudgetBoundsCandidates) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  compiler.delay_ms_ = 40;
  FakeRunner runner;
  TuneOptions o = Opts(TuneMode::kFull);
  o.budget_seconds = 0.1;  // Compiling stops starting batches after 50 ms.
  o.compile_threads = 1;
  auto all = CandidateVariants(f.chain, f.group, TuneMode::kFull, Bound::kMemory, 48);
  ASSERT_TRUE(all.ok());
  ASSERT_GE(all->size(), 6u);
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, o, compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->trials.size(), 1u);
  EXPECT_LT(r->trials.size(), all->size());
  EXPECT_TRUE(r->tuned);
}

TEST(TuneKernelTest, RunnerGetsWhatIsLeftOfTheBudget) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  compiler.delay_ms_ = 30;
  FakeRunner runner;
  TuneOptions o = Opts(TuneMode::kFull);
  o.budget_seconds = 2.0;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, o, compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  const double before_run = std::chrono::duration<double>(runner.run_at_ - t0).count();
  const CheckTask& task = runner.last_task_;
  // Compiling took some of it (30 ms per batch of 2); the runner got the rest.
  EXPECT_GT(before_run, 0.03);
  EXPECT_LE(task.budget_seconds, o.budget_seconds - 0.03);
  EXPECT_NEAR(task.budget_seconds, o.budget_seconds - before_run, 0.05);
  EXPECT_LE(task.timing.max_seconds, 1.0);
  EXPECT_GE(task.timing.max_seconds, 0.05);
  EXPECT_EQ(task.timing.min_repeats, 10);
  EXPECT_EQ(task.timing.repeats, 100);
}

TEST(TuneKernelTest, SkippedForBudgetAreRecordedAndNeverWin) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  runner.cost_seconds_ = 0.8;  // Of ~2 s: candidates 0, 1 and 2 start in time.
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kFull, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok());
  ASSERT_GE(cands->size(), 6u);
  runner.script_[(*cands)[1].ToString()] = {Outcome::kOk, 0.8e-3};
  runner.script_[(*cands)[5].ToString()] = {Outcome::kOk, 0.1e-3};  // Fastest, but too late.
  TuneOptions o = Opts(TuneMode::kFull);
  o.budget_seconds = 2.0;  // Compiling (fake) takes next to nothing of it.
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, o, compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->trials.size(), cands->size());
  int skipped = 0;
  for (const Trial& t : r->trials) {
    if (t.outcome != Outcome::kSkipped) continue;
    ++skipped;
    EXPECT_THAT(t.message, HasSubstr("budget"));
  }
  EXPECT_EQ(skipped, static_cast<int>(cands->size()) - 3);
  EXPECT_EQ(r->trials[5].outcome, Outcome::kSkipped);
  EXPECT_TRUE(r->tuned);
  EXPECT_EQ(r->best, (*cands)[1]);
}

TEST(TuneKernelTest, BudgetSpentCompilingStillRunsTheSeed) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  compiler.delay_ms_ = 60;
  FakeRunner runner;
  runner.cost_seconds_ = 0.01;
  TuneOptions o = Opts(TuneMode::kFull);
  o.budget_seconds = 0.05;  // The three kernels that are always compiled take longer.
  o.compile_threads = 1;
  absl::StatusOr<TuneResult> r = TuneKernel(f.chain, f.group, o, compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  // Not 0, which would mean "no limit": the smallest budget, so the runner
  // times the seed and skips whatever else got compiled.
  EXPECT_GT(runner.last_task_.budget_seconds, 0);
  EXPECT_LE(runner.last_task_.budget_seconds, 0.01);
  ASSERT_GE(r->trials.size(), 1u);
  EXPECT_EQ(r->trials[0].outcome, Outcome::kOk);
  EXPECT_TRUE(r->tuned);
}

// The task for several outputs (bench/results/h200-run1 three_outputs_f32):
// one BufferSpec per output in order, every kernel's output params naming
// them 0, 1, 2, and device bytes for three f32 outputs plus three f64
// references. (The failure there was stream ordering in the worker; this
// pins the host side of the task.)
TEST(TuneKernelTest, ThreeOutputsMapToThreeBuffers) {
  Fixture f = ThreeOutputs();
  FakeCompiler compiler;
  FakeRunner runner;
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  const CheckTask& task = runner.last_task_;
  const int64_t n = int64_t{1} << 27;
  ASSERT_EQ(task.inputs.size(), 1u);
  ASSERT_EQ(task.outputs.size(), 3u);
  for (const BufferSpec& b : task.outputs) {
    EXPECT_EQ(b.dtype, DType::kF32);
    EXPECT_EQ(b.elements, n);
  }
  auto outputs_of = [](const CompiledKernel& k) {
    std::vector<uint32_t> idx;
    for (const KernelParam& p : k.spec.params)
      if (p.kind == KernelParam::Kind::kBuffer && p.buffer.kind == BufferRef::Kind::kOutput)
        idx.push_back(p.buffer.index);
    return idx;
  };
  const std::vector<uint32_t> want = {0, 1, 2};
  EXPECT_EQ(outputs_of(task.reference64), want);
  EXPECT_EQ(outputs_of(task.eager), want);
  for (const CompiledKernel& k : task.candidates) EXPECT_EQ(outputs_of(k), want);
  EXPECT_TRUE(ValidateTask(task).ok());
  EXPECT_EQ(TaskDeviceBytes(task, 60 << 20), 4 * n + 3 * (4 + 8) * n + 256'000'000);
}

// The float64 reference reads an earlier kernel's result as double: the
// task marks such inputs so the worker hands it a widened copy.
TEST(TuneKernelTest, IntermediateInputsAreMarked) {
  Chain c = reduce_test::CenterColumns(DType::kF32, 4096, 1000);
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 2u);
  FakeCompiler compiler;
  FakeRunner runner;
  absl::StatusOr<TuneResult> r =
      TuneKernel(c, p->kernels[1], Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  const CheckTask& task = runner.last_task_;
  ASSERT_EQ(task.inputs.size(), 2u);
  EXPECT_FALSE(task.inputs[0].wide_reference);  // x.
  EXPECT_TRUE(task.inputs[1].wide_reference);   // Its column means.
  EXPECT_EQ(task.inputs[1].elements, 1000);
  EXPECT_EQ(TaskDeviceBytes(task, 60 << 20),
            4 * 4096 * 1000 + (4 + 8) * 1000 + (4 + 8) * 4096 * 1000 + 256'000'000);
}

// A strided input's buffer is as long as its strides reach (a padded row's
// gaps included), so the kernels checked on it read no further than it.
TEST(TuneKernelTest, AStridedInputsBufferSpansItsGaps) {
  Chain c = row_test::Strided(row_test::Softmax(DType::kBF16, 64, 1000), 0, {1024, 1});
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  FakeCompiler compiler;
  FakeRunner runner;
  ASSERT_TRUE(TuneKernel(c, p->kernels[0], Opts(TuneMode::kQuick), compiler, &runner).ok());
  const CheckTask& task = runner.last_task_;
  ASSERT_EQ(task.inputs.size(), 1u);
  EXPECT_EQ(task.inputs[0].elements, 63 * 1024 + 1000);
  EXPECT_EQ(task.outputs[0].elements, 64 * 1000);
}

// softmax over columns is three kernels; the last reads the column max and
// sum as inputs. The sum is a divisor there, so it is drawn positive, as a
// chain input in its place would be; the max may take any value.
TEST(TuneKernelTest, IntermediateInputsAreDrawnFromTheirNodesDomains) {
  Chain c = reduce_test::ColumnSoftmax(DType::kF32, 4096, 1000);
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 3u);
  FakeCompiler compiler;
  FakeRunner runner;
  ASSERT_TRUE(TuneKernel(c, p->kernels[2], Opts(TuneMode::kQuick), compiler, &runner).ok());
  const CheckTask& task = runner.last_task_;
  ASSERT_EQ(task.inputs.size(), 3u);  // x, the column max, the column sum.
  int positive = 0, any = 0;
  for (size_t i = 1; i < task.inputs.size(); ++i) {
    EXPECT_EQ(task.inputs[i].elements, 1000);
    positive += task.inputs[i].domain == InputDomain::kPositive;
    any += task.inputs[i].domain == InputDomain::kAny;
  }
  EXPECT_EQ(positive, 1);
  EXPECT_EQ(any, 1);
}

// A cross-entropy's class labels are drawn over every class (and, one in
// 16, the ignored label), not in -8..8, so a label in a row's last block is
// checked too; x is drawn as before.
TEST(TuneKernelTest, ClassLabelsAreDrawnOverTheirClasses) {
  // x[label] per row (0 where the label is -100), as a cross-entropy picks it.
  Chain c;
  const Dim rows = reduce_test::Size(&c, 4096, "n");
  const int32_t x = c.AddInput(TensorType{DType::kBF16, {rows, Dim::Static(1000)}});
  const int32_t label = c.AddCast(c.AddInput(TensorType{DType::kI64, {rows}}), DType::kI32);
  const int32_t column = c.AddOp(OpKind::kReshape, {label});
  c.nodes[column].shape = {rows, Dim::Static(1)};
  const int32_t picked = reduce_test::PickColumn(&c, x, column, 1000, /*iota_first=*/true);
  const int32_t kept = c.AddOp(OpKind::kNe, {label, c.AddConstant(-100)});
  c.outputs = {c.AddOp(OpKind::kWhere, {kept, picked, c.AddConstant(0)})};
  c = reduce_test::Finish(std::move(c));
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  FakeCompiler compiler;
  FakeRunner runner;
  ASSERT_TRUE(TuneKernel(c, p->kernels[0], Opts(TuneMode::kQuick), compiler, &runner).ok());
  const CheckTask& task = runner.last_task_;
  ASSERT_EQ(task.inputs.size(), 2u);
  EXPECT_EQ(task.inputs[0].index_extent, 0);
  EXPECT_EQ(task.inputs[1].dtype, DType::kI64);
  EXPECT_EQ(task.inputs[1].index_extent, 1000);
  EXPECT_EQ(task.inputs[1].index_other, -100);  // The chain's ignore_index.
}

// Which references read intermediates as double (and so get widened
// copies) follows from the generators: checked against their kReference64
// source for a pointwise kernel, a reduction, a matmul and a row kernel
// reading earlier kernels' results.
int CountOf(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(TuneKernelTest, WidenedIntermediatesAreThoseTheReferenceReadsAsDouble) {
  struct Case {
    const char* name;
    Chain chain;
    size_t kernel;
  } cases[] = {
      {"centre (pointwise)", reduce_test::CenterColumns(DType::kF32, 4096, 1000), 1},
      {"column softmax's sum (reduction)", reduce_test::ColumnSoftmax(DType::kBF16, 4096, 1000), 1},
      {"mlp's second product (matmul)", matmul_test::Mlp(DType::kBF16, 256, 512, 1024), 1},
      {"row softmax of standardized columns (row)",
       reduce_test::StandardizeThenRowSoftmax(DType::kBF16, 4096, 1000), 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Partition> p = PartitionChain(c.chain);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_GT(p->kernels.size(), c.kernel);
    const KernelGroup& g = p->kernels[c.kernel];
    absl::StatusOr<KernelSpec> ref =
        EmitFamily(c.chain, g, FamilyHeuristic(c.chain, g), Numerics::kReference64);
    ASSERT_TRUE(ref.ok()) << ref.status();
    // Intermediates are im<k> (in<k> of a row kernel's own chain); chain
    // inputs are read in their dtype.
    const int reads_double = CountOf(ref->source, "const double* __restrict__ i");
    EXPECT_EQ(reads_double > 0, ReferenceReadsIntermediatesAsDouble(g.family));
    FakeCompiler compiler;
    FakeRunner runner;
    absl::StatusOr<TuneResult> r =
        TuneKernel(c.chain, g, Opts(TuneMode::kQuick), compiler, &runner);
    ASSERT_TRUE(r.ok()) << r.status();
    int widened = 0;
    for (const BufferSpec& b : runner.last_task_.inputs) widened += b.wide_reference;
    EXPECT_EQ(widened, reads_double);
  }
}

TEST(TuneKernelTest, CompileErrorsAreRecorded) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok());
  compiler.fail_.insert(FastSource(f, (*cands)[1]));
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  ASSERT_TRUE(r.ok()) << r.status();
  int errors = 0;
  for (const Trial& t : r->trials) {
    if (t.outcome != Outcome::kCompileError) continue;
    ++errors;
    EXPECT_EQ(t.variant, (*cands)[1]);
    EXPECT_THAT(t.message, HasSubstr("too many resources"));
  }
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(r->trials.size(), cands->size());
  EXPECT_EQ(runner.last_task_.candidates.size(), cands->size() - 1);
}

TEST(TuneKernelTest, SeedThatDoesNotCompileIsAnError) {
  Fixture f = ReluChain();
  FakeCompiler compiler;
  FakeRunner runner;
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  compiler.fail_.insert(FastSource(f, (*cands)[0]));
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, &runner);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("seed kernel"));
}

TEST(TuneKernelTest, FamiliesWithoutAGeneratorAreUnimplemented) {
  Fixture f = ReluChain();
  f.group.family = Family::kInvalid;
  FakeCompiler compiler;
  EXPECT_EQ(TuneKernel(f.chain, f.group, Opts(TuneMode::kQuick), compiler, nullptr).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(CandidateVariantsTest, QuickIsSeedAndNeighbours) {
  Fixture f = ReluChain();
  auto cands = CandidateVariants(f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48);
  ASSERT_TRUE(cands.ok());
  const Variant& seed = (*cands)[0];
  for (size_t i = 1; i < cands->size(); ++i) {
    int differ = 0;
    for (const auto& [k, v] : seed.params) differ += (*cands)[i].Get(k) != v;
    EXPECT_EQ(differ, 1) << (*cands)[i].ToString();
  }
  auto capped = CandidateVariants(f.chain, f.group, TuneMode::kFull, Bound::kMemory, 3);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->size(), 3u);
  EXPECT_EQ((*capped)[0], seed);
}

// Rows split over a cluster of blocks and rows staged by bulk copies need
// sm_90: an sm_80 search leaves them out, its seed included.
TEST(CandidateVariantsTest, LeavesOutWhatTheGpuCannotRun) {
  Chain c = row_test::Softmax(DType::kBF16, 64, 50257);
  KernelGroup g = PartitionChain(c)->kernels[0];
  auto splits = [&](int cc) {
    auto cands = CandidateVariants(c, g, TuneMode::kFull, Bound::kMemory, 48, cc);
    EXPECT_TRUE(cands.ok()) << cands.status();
    int n = 0;
    for (const Variant& v : *cands) n += v.Get("split", 1) > 1;
    return n;
  };
  EXPECT_GT(splits(90), 0);
  EXPECT_EQ(splits(90), splits(0));
  EXPECT_EQ(splits(80), 0);
  // The heuristic stages these rows by bulk copies (sm_90); an sm_80
  // search seeds with the looped rows instead, and keeps nothing newer.
  auto seed = [&](int cc) {
    auto cands = CandidateVariants(c, g, TuneMode::kFull, Bound::kMemory, 48, cc);
    EXPECT_TRUE(cands.ok()) << cands.status();
    for (const Variant& v : *cands) EXPECT_LE(VariantMinComputeCapability(v), cc > 0 ? cc : 90);
    return cands->front();
  };
  EXPECT_EQ(seed(90).Get("resident"), 3);
  EXPECT_EQ(seed(0), seed(90));
  EXPECT_EQ(seed(80), (Variant{Family::kRowReduction,
                               {{"vec", 4}, {"threads", 1024}, {"rows", 1}, {"resident", 0}}}));
  EXPECT_EQ(CandidateVariants(c, g, TuneMode::kHeuristic, Bound::kMemory, 48, 80)->front(),
            seed(80));
  EXPECT_EQ(SeedVariant(c, g, 80).value(), seed(80));
  EXPECT_EQ(SeedVariant(c, g, 90).value(), seed(90));
}

// Few-row products at M = 64 seed with K split over a cluster (sm_90); an
// sm_80 search seeds with the same tile over the workspace and keeps no
// cluster variant.
TEST(CandidateVariantsTest, MatmulClustersOnlyWhereTheGpuHasThem) {
  Chain c = matmul_test::Linear(DType::kBF16, 64, 8192, 8192);
  KernelGroup g = PartitionChain(c)->kernels[0];
  ASSERT_EQ(g.family, Family::kMatmul);
  auto cands = [&](int cc) {
    auto v = CandidateVariants(c, g, TuneMode::kFull, Bound::kMemory, 24, cc);
    EXPECT_TRUE(v.ok()) << v.status();
    return *v;
  };
  const std::vector<Variant> h100 = cands(90), a100 = cands(80);
  ASSERT_FALSE(h100.empty());
  ASSERT_FALSE(a100.empty());
  EXPECT_EQ(h100.front().Get("cluster"), 1);
  Variant unclustered = h100.front();
  unclustered.params.erase("cluster");
  EXPECT_EQ(a100.front(), unclustered);
  for (const Variant& v : a100) EXPECT_EQ(v.Get("cluster"), 0) << v.ToString();
  EXPECT_EQ(SeedVariant(c, g, 80).value(), unclustered);
}

TEST(PrunePointwiseTest, MemoryBoundKeepsWidestVectors) {
  auto v = [](int vec, int items, int block) {
    return Variant{Family::kPointwise,
                   {{"vec", vec}, {"items", items}, {"block", block}, {"grid", 0}}};
  };
  std::vector<Variant> space;
  for (int vec : {2, 4})
    for (int items : {1, 2, 4})
      for (int block : {128, 256, 512, 1024}) space.push_back(v(vec, items, block));
  std::vector<Variant> kept = PrunePointwise(space, Bound::kMemory);
  EXPECT_EQ(kept.size(), 6u);
  for (const Variant& k : kept) {
    EXPECT_EQ(k.Get("vec"), 4);
    EXPECT_TRUE(k.Get("block") == 256 || k.Get("block") == 512);
  }
  EXPECT_EQ(PrunePointwise(space, Bound::kCompute).size(), space.size());
  // Too few survivors: the whole space.
  std::vector<Variant> small = {v(4, 1, 256), v(2, 1, 256), v(4, 1, 128)};
  EXPECT_EQ(PrunePointwise(small, Bound::kMemory).size(), small.size());
}

TEST(ComputeCapabilityOfTest, Parses) {
  EXPECT_EQ(ComputeCapabilityOf("sm_90a"), 90);
  EXPECT_EQ(ComputeCapabilityOf("sm_100f"), 100);
  EXPECT_EQ(ComputeCapabilityOf("compute_90"), 0);
  EXPECT_EQ(ComputeCapabilityOf("sm_"), 0);
}

// A heuristic whose grid no launch takes (a softmax over 2^33 rows of width
// 2 in blocks of four rows: 2^31 blocks) gives way to the first variant of
// the space whose grid fits.
TEST(SearchTest, AHeuristicWhoseGridNoLaunchTakesSeedsWithOneThatFits) {
  const Chain c = row_test::Softmax(DType::kF32, int64_t{1} << 33, 2);
  const KernelGroup g = PartitionChain(c)->kernels[0];
  const absl::StatusOr<KernelSpec> heuristic = EmitFamily(c, g, FamilyHeuristic(c, g));
  ASSERT_FALSE(heuristic.ok());
  EXPECT_THAT(std::string(heuristic.status().message()), HasSubstr("past a grid's 2147483647"));
  absl::StatusOr<Variant> seed = SeedVariant(c, g, 90);
  ASSERT_TRUE(seed.ok()) << seed.status();
  absl::StatusOr<KernelSpec> k = EmitFamily(c, g, *seed);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_TRUE(k->grid.x.is_const());
  EXPECT_LE(k->grid.x.value(), kMaxGridDims[0]);
}

}  // namespace
}  // namespace kfuse
