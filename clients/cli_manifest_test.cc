// `kfuse tune --manifest` without a server: parsing, bucket hints, resume
// bookkeeping, the progress line; then the run against the fake service.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clients/cli.h"
#include "clients/fake_kernel_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kfuse_manifest_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "chains");
    std::filesystem::copy_file("examples/relu_fma_f32_symbolic.json", dir_ / "chains" / "sym.json");
    std::filesystem::copy_file("examples/relu_fma_f32.json", dir_ / "chains" / "static.json");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  absl::StatusOr<std::vector<ManifestItem>> Parse(const std::string& json, ManifestDefaults d = {}) {
    return ParseManifest(json, "m.json", dir_.string(), d);
  }

  std::filesystem::path dir_;
};

// The hint of every dim with `symbol` in the request's chain.
std::vector<int64_t> Hints(const kfuse::v1::CompileRequest& r, const std::string& symbol) {
  std::vector<int64_t> out;
  for (const auto& in : r.chain().inputs()) {
    for (const auto& d : in.shape()) {
      if (d.symbol() == symbol) out.push_back(d.hint());
    }
  }
  return out;
}

TEST_F(ManifestTest, BucketsBecomeHintsOneItemEach) {
  auto items = Parse(R"({"entries": [
      {"chain": "chains/sym.json", "buckets": [{"N": 4096}, {"N": 65536}], "mode": "full",
       "budget_seconds": 5, "arch": "sm_80"},
      {"chain": "chains/static.json"}]})");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 3u);
  const ManifestItem& a = (*items)[0];
  const ManifestItem& b = (*items)[1];
  const ManifestItem& c = (*items)[2];
  EXPECT_EQ(a.entry, 0);
  EXPECT_EQ(a.bucket, 0);
  EXPECT_EQ(b.bucket, 1);
  EXPECT_EQ(c.entry, 1);
  EXPECT_EQ(c.bucket, -1);
  EXPECT_EQ(a.label, "chains/sym.json N=4096");
  EXPECT_EQ(b.label, "chains/sym.json N=65536");
  EXPECT_EQ(c.label, "chains/static.json");
  EXPECT_EQ(Hints(a.request, "N"), (std::vector<int64_t>{4096, 4096, 4096}));
  EXPECT_EQ(Hints(b.request, "N"), (std::vector<int64_t>{65536, 65536, 65536}));
  EXPECT_EQ(a.request.policy().mode(), kfuse::v1::TuningPolicy::MODE_FULL);
  EXPECT_EQ(a.request.policy().budget_seconds(), 5);
  EXPECT_EQ(a.request.target().compute_capability(), 80u);
  // The flags' defaults for what an entry leaves out.
  EXPECT_EQ(c.request.policy().mode(), kfuse::v1::TuningPolicy::MODE_QUICK);
  EXPECT_EQ(c.request.policy().budget_seconds(), 0);
  EXPECT_EQ(c.request.target().compute_capability(), 0u);
  // Ids differ by bucket and are stable.
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(a.id, ManifestItemId(a.request));
  EXPECT_EQ(a.id.size(), 64u);
}

TEST_F(ManifestTest, FlagsAreDefaultsAndTheIdFollowsModeAndArch) {
  const std::string json = R"({"entries": [{"chain": "chains/static.json"}]})";
  auto quick = Parse(json);
  auto full = Parse(json, {"full", "", 0});
  auto sm80 = Parse(json, {"quick", "sm_80", 3});
  ASSERT_TRUE(quick.ok() && full.ok() && sm80.ok());
  EXPECT_EQ((*full)[0].request.policy().mode(), kfuse::v1::TuningPolicy::MODE_FULL);
  EXPECT_EQ((*sm80)[0].request.target().compute_capability(), 80u);
  EXPECT_EQ((*sm80)[0].request.policy().budget_seconds(), 3);
  EXPECT_NE((*quick)[0].id, (*full)[0].id);
  EXPECT_NE((*quick)[0].id, (*sm80)[0].id);
  EXPECT_EQ((*quick)[0].id, (*Parse(json))[0].id);
}

TEST_F(ManifestTest, AnInlineChainIsAChainObject) {
  std::ifstream in("examples/relu_fma_f32_symbolic.json");
  std::stringstream chain;
  chain << in.rdbuf();
  auto items =
      Parse(absl::StrCat(R"({"entries": [{"chain": )", chain.str(), R"(, "buckets": [{"N": 128}]}]})"));
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 1u);
  EXPECT_EQ((*items)[0].label, "entries[0] N=128");
  EXPECT_EQ(Hints((*items)[0].request, "N"), (std::vector<int64_t>{128, 128, 128}));
  EXPECT_EQ((*items)[0].request.chain().ops_size(), 3);
}

// An inline chain is read from the manifest's text: its errors give the
// manifest's line and column and show that line, and its numbers are read
// as written (not through a double).
TEST_F(ManifestTest, AnInlineChainIsReadWhereItIsWritten) {
  const std::string good = R"({"entries": [
  {"chain": "chains/static.json"},
  {"chain": {"inputs": [{"name": "x", "dtype": "DTYPE_I32", "shape": [{"size": 4}]}],
             "ops": [{"kind": "OP_ADD", "args": [{"input": 0}, {"op": 1}]},
                     {"kind": "OP_CONSTANT", "value": 16777217, "dtype": "DTYPE_I32"}],
             "outputs": [{"name": "y", "value": {"op": 0}}]}}
]})";
  auto items = Parse(good);
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[1].request.chain().ops(1).value(), 16777217.0);

  const std::string bad = R"({"entries": [
  {"chain": "chains/static.json"},
  {"mode": "quick",
   "chain": {"inputs": [{"name": "x", "dtype": "DTYPE_F32", "shape": [{"size": 4}]}],
             "ops": [{"kind": "OP_CONSTANT", "value": 2, "weakFloat": true, "weak_float": true}],
             "outputs": [{"name": "y", "value": {"op": 0}}]}}
]})";
  auto refused = Parse(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(refused.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("entries[1].chain: m.json:5:77: not a valid kfuse.v1.Chain in JSON: "
                                            "the key \"weak_float\" again in one object"));
  EXPECT_THAT(message, ::testing::HasSubstr(
                           "\n               \"ops\": [{\"kind\": \"OP_CONSTANT\", \"value\": 2, \"weakFloat\""));
}

TEST_F(ManifestTest, BadManifestsNameTheEntryAndField) {
  struct Case {
    std::string json;
    std::string message;
  };
  const Case cases[] = {
      {R"([])", "m.json: "},
      {R"({"entries": 3})", "expected {\"entries\": [...]}"},
      {R"({"entries": [], "extra": 1})", "unknown field 'extra'"},
      {R"({"entries": [{"chain": "chains/static.json"}, {"buckets": []}]})", "entries[1].chain: missing"},
      {R"({"entries": [{"chain": "chains/none.json"}]})", "entries[0].chain: "},
      {R"({"entries": [{"chain": 7}]})", "entries[0].chain: expected a file name or a kfuse.v1.Chain object"},
      {R"({"entries": [{"chain": {"inputs": [], "bogus": 1}}]})", "entries[0].chain"},
      {R"({"entries": [{"chain": "chains/sym.json", "buckets": [{"N": 0}]}]})",
       "entries[0].buckets[0].N: expected a positive whole number"},
      {R"({"entries": [{"chain": "chains/sym.json", "buckets": [{"N": 1.5}]}]})",
       "entries[0].buckets[0].N: expected a positive whole number"},
      {R"({"entries": [{"chain": "chains/sym.json", "buckets": [{"N": 9223372036854775807}]}]})",
       "entries[0].buckets[0].N: past 2^53"},
      {R"({"entries": [{"chain": "chains/sym.json", "buckets": [{"M": 64}]}]})",
       "entries[0].buckets[0]: 'M' is not a symbol of the chain (it has N)"},
      {R"({"entries": [{"chain": "chains/static.json", "buckets": [{"N": 64}]}]})",
       "entries[0].buckets[0]: 'N' is not a symbol of the chain (it has none)"},
      {R"({"entries": [{"chain": "chains/sym.json", "buckets": [{}]}]})",
       "entries[0].buckets[0]: expected an object"},
      {R"({"entries": [{"chain": "chains/sym.json", "buckets": {"N": 4}}]})",
       "entries[0].buckets: expected a list"},
      {R"({"entries": [{"chain": "chains/static.json", "mode": "heuristic"}]})",
       "entries[0].mode: 'heuristic': expected quick or full"},
      {R"({"entries": [{"chain": "chains/static.json", "budget_seconds": -1}]})",
       "entries[0].budget_seconds"},
      {R"({"entries": [{"chain": "chains/static.json", "budget_seconds": 1e9}]})",
       "entries[0].budget_seconds: expected a number of seconds from 0 to 3600"},
      {R"({"entries": [{"chain": "chains/static.json", "arch": "sm_9000"}]})",
       "entries[0].arch: 'sm_9000': expected sm_XY or sm_XYa"},
      {R"({"entries": [{"chain": "chains/static.json", "arch": ""}]})",
       "entries[0].arch: must name a target"},
      {R"({"entries": [{"chain": "chains/static.json", "buket": []}]})", "entries[0]: unknown field 'buket'"},
      {R"({"entries": [{"chain": "chains/static.json"})", "m.json"},
  };
  for (const Case& c : cases) {
    auto items = Parse(c.json);
    ASSERT_FALSE(items.ok()) << c.json;
    EXPECT_EQ(items.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(items.status().message()), HasSubstr(c.message)) << c.json;
  }
  auto bad_default = Parse(R"({"entries": []})", {"heuristic", "", 0});
  EXPECT_THAT(std::string(bad_default.status().message()), HasSubstr("--mode"));
}

TEST_F(ManifestTest, ApplyBucketSetsEveryDimOfTheSymbol) {
  kfuse::v1::Chain chain;
  auto* in = chain.add_inputs();
  in->add_shape()->set_symbol("rows");
  in->add_shape()->set_size(4096);
  auto* op = chain.add_ops();
  op->mutable_shape()->add_shape()->set_symbol("rows");
  ASSERT_TRUE(ApplyBucket({{"rows", 32}}, &chain).ok());
  EXPECT_EQ(chain.inputs(0).shape(0).hint(), 32);
  EXPECT_EQ(chain.inputs(0).shape(1).hint(), 0);  // A static dim is left alone.
  EXPECT_EQ(chain.ops(0).shape().shape(0).hint(), 32);
}

TEST_F(ManifestTest, StateSkipsFinishedItemsAndToleratesATornLine) {
  auto items =
      Parse(R"({"entries": [{"chain": "chains/sym.json", "buckets": [{"N": 1}, {"N": 2}, {"N": 3}]}]})");
  ASSERT_TRUE(items.ok());
  const std::string state = (dir_ / "m.state").string();
  auto empty = LoadTuneState(state);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  ASSERT_TRUE(AppendTuneState(state, (*items)[0], "tuned", "k0").ok());
  ASSERT_TRUE(AppendTuneState(state, (*items)[2], "stored", "k2").ok());
  std::ofstream(state, std::ios::app) << "{\"id\": \"" << (*items)[1].id.substr(0, 10);  // Killed mid-write.
  auto done = LoadTuneState(state);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(*done, (std::set<std::string>{(*items)[0].id, (*items)[2].id}));
  // The next run's record after the torn line is a line of its own.
  ASSERT_TRUE(AppendTuneState(state, (*items)[1], "tuned", "k1").ok());
  done = LoadTuneState(state);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->size(), 3u);
  std::ifstream in(state);
  std::string first;
  std::getline(in, first);
  EXPECT_THAT(first, HasSubstr("\"outcome\":\"tuned\""));
  EXPECT_THAT(first, HasSubstr("\"label\":\"chains/sym.json N=1\""));
}

TEST(ManifestFormatTest, DurationAndProgressLine) {
  EXPECT_EQ(FormatDuration(4.2), "4s");
  EXPECT_EQ(FormatDuration(62.4), "1m02s");
  EXPECT_EQ(FormatDuration(3725), "1h02m05s");
  EXPECT_EQ(FormatDuration(-3), "0s");
  EXPECT_EQ(FormatManifestProgress(2, 6, "relu.json N=4096", 3, 12, 62, 190),
            "[2/6] relu.json N=4096  trials 3/12  elapsed 1m02s  ETA 3m10s");
  EXPECT_EQ(FormatManifestProgress(1, 1, "x", 0, 0, 0, -1), "[1/1] x  trials -  elapsed 0s  ETA -");
}

// The run, against the fake service.
class ManifestRunTest : public ManifestTest {
 protected:
  void SetUp() override {
    ManifestTest::SetUp();
    ASSERT_TRUE(fake_.ok());
    g_.server = fake_.address();
    g_.timeout_seconds = 10;
    o_.mode = "full";  // The fake answers QUICK without a result.
  }

  std::ostringstream out_, err_;
  CliIo io_{out_, err_, false};
  FakeServer fake_;
  GlobalOptions g_;
  TuneOptions o_;
};

TEST_F(ManifestRunTest, TunesEachItemThenResumesSkippingFinishedOnes) {
  o_.manifest = Write("m.json", R"({"entries": [
      {"chain": "chains/sym.json", "buckets": [{"N": 4096}, {"N": 65536}]},
      {"chain": "chains/static.json"}]})");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str() << out_.str();
  ASSERT_EQ(fake_.service().tune_requests.size(), 3u);
  EXPECT_EQ(Hints(fake_.service().tune_requests[0], "N"), (std::vector<int64_t>{4096, 4096, 4096}));
  EXPECT_EQ(Hints(fake_.service().tune_requests[1], "N"), (std::vector<int64_t>{65536, 65536, 65536}));
  EXPECT_THAT(out_.str(), HasSubstr("[1/3] chains/sym.json N=4096: tuned"));
  EXPECT_THAT(out_.str(), HasSubstr("[3/3] chains/static.json: tuned"));
  EXPECT_THAT(out_.str(), HasSubstr("tuned 3, already stored 0, failed 0, not started 0"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("\r")));
  EXPECT_TRUE(std::filesystem::exists(o_.manifest + ".state"));

  // A rerun starts nothing; a new bucket is the only item tuned.
  out_.str("");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  EXPECT_EQ(fake_.service().tune_requests.size(), 3u);
  EXPECT_THAT(out_.str(), HasSubstr("tuned 0, already stored 0, failed 0, not started 0"));
  EXPECT_THAT(out_.str(), HasSubstr("3 done in an earlier run"));
  Write("m.json", R"({"entries": [
      {"chain": "chains/sym.json", "buckets": [{"N": 4096}, {"N": 65536}, {"N": 128}]},
      {"chain": "chains/static.json"}]})");
  out_.str("");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  ASSERT_EQ(fake_.service().tune_requests.size(), 4u);
  EXPECT_EQ(Hints(fake_.service().tune_requests[3], "N"), (std::vector<int64_t>{128, 128, 128}));

  // Without the state file, what the server has stored is "already stored".
  std::filesystem::remove(o_.manifest + ".state");
  out_.str("");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("tuned 0, already stored 4, failed 0"));
}

TEST_F(ManifestRunTest, ARequestListedTwiceIsSentOnce) {
  // A bucket given twice, and one chain in two entries: one request each.
  o_.manifest = Write("m.json", R"({"entries": [
      {"chain": "chains/sym.json", "buckets": [{"N": 4096}, {"N": 4096}, {"N": 8}]},
      {"chain": "chains/static.json"},
      {"chain": "chains/static.json", "mode": "full"}]})");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str() << out_.str();
  ASSERT_EQ(fake_.service().tune_requests.size(), 3u);
  EXPECT_THAT(out_.str(), HasSubstr("[2/5] chains/sym.json N=4096: the same request as item 1\n"));
  EXPECT_THAT(out_.str(), HasSubstr("[5/5] chains/static.json: the same request as item 4\n"));
  EXPECT_THAT(out_.str(), HasSubstr("tuned 3, already stored 0, failed 0, not started 0; 2 repeating an earlier item, not sent again"));

  // Another mode is another request; --json names the first of a repeat.
  Write("m.json", R"({"entries": [
      {"chain": "chains/static.json"},
      {"chain": "chains/static.json", "mode": "quick"},
      {"chain": "chains/static.json"}]})");
  std::filesystem::remove(o_.manifest + ".state");
  g_.json = true;
  out_.str("");
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitFailed) << out_.str();  // The fake answers QUICK untimed.
  EXPECT_EQ(fake_.service().tune_requests.size(), 5u);
  EXPECT_THAT(out_.str(), HasSubstr(R"("outcome":"repeat")"));
  EXPECT_THAT(out_.str(), HasSubstr(R"("repeat_of":1)"));
  EXPECT_THAT(out_.str(), HasSubstr(R"("repeats":1)"));
}

TEST_F(ManifestRunTest, AFailedItemIsReportedAndNotRecorded) {
  o_.manifest = Write("m.json", R"({"entries": [
      {"chain": {"inputs": [{"name": "x", "dtype": "DTYPE_F32", "shape": [{"size": 4}]}]}},
      {"chain": "chains/static.json"}]})");
  o_.state = (dir_ / "custom.state").string();
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitFailed);
  EXPECT_THAT(out_.str(), HasSubstr("[1/2] entries[0]: failed: INVALID_ARGUMENT: chain: no outputs"));
  EXPECT_THAT(out_.str(), HasSubstr("tuned 1, already stored 0, failed 1"));
  auto state = LoadTuneState(o_.state);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->size(), 1u);  // The failed item is tried again next time.
}

TEST_F(ManifestRunTest, AnUntunedAnswerIsNotRecordedAndFailsTheRun) {
  // A server without a GPU (or one whose GPU stayed busy) answers with the
  // heuristic plan: the item is not done, and a rerun asks again.
  fake_.service().untimed = true;
  o_.manifest = Write("m.json", R"({"entries": [
      {"chain": "chains/sym.json", "buckets": [{"N": 1}, {"N": 2}]}]})");
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitFailed);
  EXPECT_THAT(out_.str(), HasSubstr("[1/2] chains/sym.json N=1: not tuned: heuristic (no GPU in the fake)"));
  EXPECT_THAT(out_.str(), HasSubstr("tuned 0, already stored 0, failed 0, not started 0, not tuned 2"));
  auto state = LoadTuneState(o_.manifest + ".state");
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->empty());

  fake_.service().untimed = false;
  out_.str("");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  EXPECT_EQ(fake_.service().tune_requests.size(), 4u);
  EXPECT_THAT(out_.str(), Not(HasSubstr("done in an earlier run")));
}

// A manifest that is not there is NOT_FOUND (as a chain is); one that is not
// JSON says so, without naming the parser's message type. Both exit 2.
TEST_F(ManifestRunTest, AMissingOrNonJsonManifestIsAUsageError) {
  o_.manifest = Write("m.json", "") + ".missing";
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_FOUND: " + o_.manifest + ": No such file or directory"));
  err_.str("");
  o_.manifest = Write("garbage.json", "garbage");
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("INVALID_ARGUMENT: " + o_.manifest + ": not a JSON object"));
  EXPECT_TRUE(fake_.service().tune_requests.empty());
}

// An empty manifest is no error, but the run says it had nothing to do.
TEST_F(ManifestRunTest, AnEmptyManifestSaysItListsNothing) {
  o_.manifest = Write("m.json", R"({"entries": []})");
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr(o_.manifest + " lists no entries; nothing to tune"));
  EXPECT_THAT(out_.str(), HasSubstr("tuned 0, already stored 0, failed 0, not started 0"));
  EXPECT_TRUE(fake_.service().tune_requests.empty());
}

TEST_F(ManifestRunTest, NoItemStartsOnceTheTotalBudgetIsSpent) {
  fake_.service().tune_delay_ms = 150;
  o_.budget_total_seconds = 0.05;
  o_.manifest = Write("m.json", R"({"entries": [
      {"chain": "chains/sym.json", "buckets": [{"N": 1}, {"N": 2}, {"N": 3}]}]})");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  EXPECT_EQ(fake_.service().tune_requests.size(), 1u);
  EXPECT_THAT(out_.str(), HasSubstr("tuned 1, already stored 0, failed 0, not started 2 (budget)"));

  // --json: one object per item, the ones not started too.
  g_.json = true;
  o_.state = Write("json.state", "");
  out_.str("");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  const std::string text = out_.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4) << text;  // Three items, the summary.
  size_t not_started = 0;
  for (size_t at = text.find("\"outcome\":\"not_started\""); at != std::string::npos;
       at = text.find("\"outcome\":\"not_started\"", at + 1)) {
    ++not_started;
  }
  EXPECT_EQ(not_started, 2u) << text;
  EXPECT_THAT(text, HasSubstr("\"not_started\":2"));
}

TEST_F(ManifestRunTest, ABarOnATty) {
  io_.out_is_tty = true;
  o_.manifest = Write("m.json", R"({"entries": [{"chain": "chains/static.json"}]})");
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\r[################] [1/1] chains/static.json  trials 3/3  elapsed"));
}

TEST_F(ManifestRunTest, BadUsageIsExitTwoAndSendsNothing) {
  o_.manifest = Write("m.json", R"({"entries": [{"chain": "chains/static.json", "mode": "fast"}]})");
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("entries[0].mode"));
  o_.manifest = Write("m.json", R"({"entries": [{"chain": "chains/static.json"}]})");
  o_.chain_path = "examples/relu_fma_f32.json";
  EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitUsage);
  EXPECT_TRUE(fake_.service().tune_requests.empty());
}

// The total bounds the whole run: no cap (an overnight warm-up), but no
// negative or non-finite value, each refused in words of its own.
TEST_F(ManifestRunTest, TheTotalBudgetHasNoCapButMustBeANumberOfSeconds) {
  o_.manifest = Write("m.json", R"({"entries": [{"chain": "chains/static.json"}]})");
  o_.budget_total_seconds = 7200;
  ASSERT_EQ(RunTuneManifest(g_, o_, io_), kExitOk) << err_.str();
  EXPECT_EQ(fake_.service().tune_requests.size(), 1u);
  for (double total : {-1.0, std::nan(""), HUGE_VAL}) {
    err_.str("");
    o_.budget_total_seconds = total;
    o_.state = Write("again.state", "");
    EXPECT_EQ(RunTuneManifest(g_, o_, io_), kExitUsage) << total;
    EXPECT_THAT(err_.str(), HasSubstr("--budget-total"));
    EXPECT_THAT(err_.str(), HasSubstr("0 or more (0: no limit)"));
  }
  EXPECT_EQ(fake_.service().tune_requests.size(), 1u);
}

}  // namespace
}  // namespace kfuse::client
