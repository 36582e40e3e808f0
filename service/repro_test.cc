// Repro bundles: what a bundle holds, caps and rotation, names never taken
// from client text, and the pipeline leaving bundles (without a GPU: a fake
// compiler and a fake runner) without ever failing a request for it.
#include "service/repro.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/generators.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "service/metrics.h"
#include "service/pipeline.h"

namespace kfuse {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// A fresh, empty directory for this test.
std::string TestDir(const std::string& what) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir =
      ::testing::TempDir() + "/repro_test_" + info->test_suite_name() + "_" + info->name() + "_" + what;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// relu(x * scale), with client names chosen to break naive writers.
v1::CompileRequest Relu(double scale, const std::string& input_name = "x") {
  v1::CompileRequest r;
  v1::TensorSpec* in = r.mutable_chain()->add_inputs();
  in->set_name(input_name);
  in->set_dtype(v1::DTYPE_F32);
  in->add_shape()->set_size(4096);
  v1::Op* c = r.mutable_chain()->add_ops();
  c->set_kind(v1::OP_CONSTANT);
  c->set_value(scale);
  v1::Op* mul = r.mutable_chain()->add_ops();
  mul->set_kind(v1::OP_MUL);
  mul->add_args()->set_input(0);
  mul->add_args()->set_op(0);
  v1::Op* relu = r.mutable_chain()->add_ops();
  relu->set_kind(v1::OP_RELU);
  relu->add_args()->set_op(1);
  v1::Output* out = r.mutable_chain()->add_outputs();
  out->set_name("y");
  out->mutable_value()->set_op(2);
  return r;
}

ReproInfo SampleInfo() {
  ReproInfo info;
  info.kind = ReproKind::kWrongResult;
  info.chain = Relu(2.0, "x\"\n</script>../../etc/passwd").chain();
  info.kernel_index = 0;
  info.variant = Variant{Family::kPointwise, {{"block", 256}, {"vec", 4}}};
  info.entry = "kf_pw_0123";
  info.source = "extern \"C\" __global__ void kf_pw_0123() {}\n";
  info.message = "max error 3.5 > tolerance 1e-6";
  info.key = "e425b0a3ab90deadbeef";
  info.symbol_values = {1 << 20, 7};
  info.generator_version = "pointwise/1";
  info.nvrtc_version = "nvrtc-13.0";
  info.arch = "sm_90a";
  info.compile_options = {"--gpu-architecture=sm_90a", "-lineinfo"};
  info.driver_version = 13000;
  DeviceFingerprint d;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.sm_count = 132;
  d.memory_bytes = int64_t{141} << 30;
  d.ecc = true;
  info.device = d;
  return info;
}

TEST(ReproTest, BundleHoldsChainVariantSourceAndInfo) {
  const std::string root = TestDir("root");
  const ReproInfo info = SampleInfo();
  absl::StatusOr<std::string> dir = WriteReproBundle(root, info);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_THAT(Entries(*dir), ::testing::ElementsAre("chain.json", "info.json", "kernel.cu", "variant.txt"));
  EXPECT_EQ(fs::status(*dir).permissions(), fs::perms::owner_all);
  EXPECT_EQ(fs::status(*dir + "/chain.json").permissions(), fs::perms::owner_read | fs::perms::owner_write);

  v1::Chain chain;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(Slurp(*dir + "/chain.json"), &chain).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(chain, info.chain));
  EXPECT_EQ(Slurp(*dir + "/variant.txt"), "pointwise{block=256,vec=4}\nfamily: pointwise\n");
  EXPECT_EQ(Slurp(*dir + "/kernel.cu"), info.source);

  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(Slurp(*dir + "/info.json"), &json).ok());
  const auto& f = json.fields();
  EXPECT_EQ(f.at("kind").string_value(), "wrong_result");
  EXPECT_EQ(f.at("message").string_value(), info.message);
  EXPECT_EQ(f.at("key").string_value(), info.key);
  EXPECT_EQ(f.at("kernel_index").number_value(), 0);
  EXPECT_EQ(f.at("versions").struct_value().fields().at("kfuse").string_value(), kKfuseVersion);
  EXPECT_EQ(f.at("versions").struct_value().fields().at("nvrtc").string_value(), "nvrtc-13.0");
  EXPECT_EQ(f.at("versions").struct_value().fields().at("driver").number_value(), 13000);
  EXPECT_EQ(f.at("compile").struct_value().fields().at("arch").string_value(), "sm_90a");
  EXPECT_EQ(f.at("device").struct_value().fields().at("digest").string_value(), info.device->Digest());

  absl::StatusOr<ReproInfo> back = ReadReproBundle(*dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, info.kind);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back->chain, info.chain));
  EXPECT_EQ(back->variant, info.variant);
  EXPECT_EQ(back->entry, info.entry);
  EXPECT_EQ(back->source, info.source);
  EXPECT_EQ(back->message, info.message);
  EXPECT_EQ(back->symbol_values, info.symbol_values);
  EXPECT_EQ(back->generator_version, "pointwise/1");
  EXPECT_EQ(back->compile_options, info.compile_options);
  EXPECT_EQ(back->driver_version, 13000u);
  ASSERT_TRUE(back->device.has_value());
  EXPECT_EQ(back->device->Digest(), info.device->Digest());
  EXPECT_EQ(back->time, info.time);
}

TEST(ReproTest, NamesAreGeneratedNeverFromClientText) {
  const std::string root = TestDir("root") + "/made/here";
  ReproInfo info = SampleInfo();
  info.key = "../../x/../y";  // Not hex: no part of it reaches the name.
  info.kind = ReproKind::kCompileError;
  absl::StatusOr<std::string> dir = WriteReproBundle(root, info);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(fs::path(*dir).parent_path(), fs::path(root));
  const std::string name = fs::path(*dir).filename().string();
  EXPECT_TRUE(IsReproBundleName(name)) << name;
  EXPECT_THAT(name, HasSubstr("-nokey-compile_error-"));
  EXPECT_THAT(Entries(root), ::testing::ElementsAre(name));
  EXPECT_EQ(fs::status(root).permissions(), fs::perms::owner_all);

  info.key = "E425B0A3AB90DEADBEEF";
  dir = WriteReproBundle(root, info);
  ASSERT_TRUE(dir.ok());
  EXPECT_THAT(fs::path(*dir).filename().string(), HasSubstr("-e425b0a3ab90-compile_error-"));
  // Client text is inside chain.json, escaped, and nowhere else.
  EXPECT_THAT(Slurp(*dir + "/chain.json"),
              HasSubstr(R"("name": "x\"\n\u003c/script\u003e../../etc/passwd")"));
  EXPECT_THAT(Slurp(*dir + "/info.json"), ::testing::Not(HasSubstr("passwd")));
}

TEST(ReproTest, KeepsAtMostMaxBundlesRemovingTheOldestFirst) {
  const std::string root = TestDir("root");
  fs::create_directories(root + "/notes");  // Not a bundle: never removed.
  ReproLimits limits;
  limits.max_bundles = 3;
  std::vector<std::string> written;
  ReproInfo info = SampleInfo();
  for (int i = 0; i < 6; ++i) {
    info.time = absl::FromUnixSeconds(1700000000 + i);
    absl::StatusOr<std::string> dir = WriteReproBundle(root, info, limits);
    ASSERT_TRUE(dir.ok()) << dir.status();
    written.push_back(fs::path(*dir).filename().string());
  }
  EXPECT_THAT(Entries(root), ::testing::ElementsAre(written[3], written[4], written[5], "notes"));
}

TEST(ReproTest, FilesOverTheCapAreLeftOutAndTheMessageShortened) {
  const std::string root = TestDir("root");
  ReproLimits limits;
  limits.max_file_bytes = 2048;
  ReproInfo info = SampleInfo();
  info.source = std::string(5000, 'x');
  info.message = std::string(10000, 'm') + "\xff\xfe";  // And not UTF-8.
  absl::StatusOr<std::string> dir = WriteReproBundle(root, info, limits);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_FALSE(fs::exists(*dir + "/kernel.cu"));
  for (const auto& e : fs::directory_iterator(*dir)) EXPECT_LE(fs::file_size(e.path()), 2048u) << e.path();
  absl::StatusOr<ReproInfo> back = ReadReproBundle(*dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->source.empty());
  ASSERT_EQ(back->omitted.size(), 1u);
  EXPECT_THAT(back->omitted[0], StartsWith("kernel.cu: 5000 bytes"));
  EXPECT_TRUE(back->message_truncated);
  EXPECT_LT(back->message.size(), info.message.size());
}

TEST(ReproTest, AnUnwritableRootIsAnErrorNamingThePath) {
  const std::string base = TestDir("base");
  std::ofstream(base + "/file") << "not a directory";
  absl::StatusOr<std::string> dir = WriteReproBundle(base + "/file/repro", SampleInfo());
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr(base + "/file"));
  EXPECT_FALSE(WriteReproBundle("", SampleInfo()).ok());
}

TEST(ReproTest, ReadRejectsMalformedBundlesNamingTheFileAndField) {
  const std::string root = TestDir("root");
  struct Case {
    const char* file;
    const char* contents;
    const char* message;
  };
  const Case cases[] = {
      {"info.json", "{", "info.json"},
      {"info.json", R"({"kind": "melted", "kernel_index": 0, "compile": {"arch": "sm_90"}})",
       "info.json: kind"},
      {"info.json", R"({"kind": "fault", "kernel_index": 0.5, "compile": {"arch": "sm_90"}})",
       "info.json: kernel_index"},
      {"info.json", R"({"kind": "fault", "kernel_index": 0})", "info.json: compile"},
      {"info.json", R"({"kind": "fault", "kernel_index": 0, "compile": {"arch": "sm_90"}, "numerics": "x"})",
       "info.json: numerics"},
      {"variant.txt", "pointwise{block=}", "variant.txt"},
      {"variant.txt", "teapot{}", "unknown family"},
      {"chain.json", R"({"opz": []})", "chain.json"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> dir = WriteReproBundle(root, SampleInfo());
    ASSERT_TRUE(dir.ok()) << dir.status();
    std::ofstream(*dir + "/" + c.file, std::ios::trunc) << c.contents;
    absl::StatusOr<ReproInfo> back = ReadReproBundle(*dir);
    EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument) << c.file << ": " << c.contents;
    EXPECT_THAT(std::string(back.status().message()), HasSubstr(c.message)) << c.contents;
  }
  absl::StatusOr<std::string> dir = WriteReproBundle(root, SampleInfo());
  ASSERT_TRUE(dir.ok());
  fs::remove(*dir + "/info.json");
  EXPECT_EQ(ReadReproBundle(*dir).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadReproBundle(root + "/missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(ReproTest, VariantTextRoundTrips) {
  const Variant v{Family::kRowReduction, {{"block", 128}, {"rows", 2}, {"neg", -1}}};
  absl::StatusOr<Variant> back = ParseVariant(v.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, v);
  EXPECT_EQ(*ParseVariant("pointwise{}"), (Variant{Family::kPointwise, {}}));
  for (const char* bad : {"", "pointwise", "pointwise{a=1", "pointwise{a=1,a=2}", "pointwise{a b=1}",
                          "pointwise{=1}", "invalid{}"}) {
    EXPECT_EQ(ParseVariant(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ReproTest, OnlyGeneratedNamesLookLikeBundles) {
  EXPECT_TRUE(IsReproBundleName("20250102T030405.123456Z-e425b0a3ab90-compile_error-7"));
  EXPECT_TRUE(IsReproBundleName("20250102T030405.123456Z-nokey-timeout-0"));
  for (const char* bad :
       {"notes", "", "20250102T030405.123456Z-e425-melted-7", "20250102T030405.123456Z-e425-fault-07",
        "20250102T030405Z-e425-fault-7", "20250102T030405.123456Z-e4/5-fault-7", ".tmp-1-2"}) {
    EXPECT_FALSE(IsReproBundleName(bad)) << bad;
  }
}

// --- The pipeline leaves bundles. ---

// Compiles every kernel, or fails every compile with an NVRTC-like log (or
// with `refusal`: the compiler's capacity refusals, a source over its limit).
class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(bool fail, absl::Status refusal = absl::OkStatus()) : fail_(fail), refusal_(refusal) {}
  absl::StatusOr<CompiledKernel> Compile(const KernelSpec& spec, const CompileOptions& opts,
                                         const std::atomic<bool>*) override {
    ++calls;
    if (!refusal_.ok()) return refusal_;
    if (fail_) return absl::InternalError("kernel.cu(12): error: expected a \";\"");
    CompiledKernel k;
    k.spec = spec;
    k.arch = opts.arch;
    k.cubin =
        "\x7f"
        "ELF-fake";
    return k;
  }
  std::string Version() const override { return "fake-1"; }
  std::atomic<int> calls{0};

 private:
  bool fail_;
  absl::Status refusal_;
};

// A GPU whose candidates fail in turn: ok, wrong result, fault, timeout.
class FakeRunner : public Runner {
 public:
  absl::StatusOr<std::vector<Trial>> Run(const CheckTask& task,
                                         const std::function<void(const Trial&)>& on_trial) override {
    const Outcome cycle[] = {Outcome::kOk, Outcome::kWrongResult, Outcome::kFault, Outcome::kWrongResult,
                             Outcome::kTimeout};
    std::vector<Trial> trials;
    for (size_t i = 0; i < task.candidates.size(); ++i) {
      Trial t;
      t.outcome = cycle[i % 5];
      t.median_seconds = 1e-5;
      t.message = t.outcome == Outcome::kOk ? "max error 0" : "candidate " + std::to_string(i) + " failed";
      if (on_trial) on_trial(t);
      trials.push_back(t);
    }
    return trials;
  }
  absl::StatusOr<DeviceFingerprint> Device() override { return Fingerprint(); }
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* /*cancel*/) override { return NominalCeilings(90); }
  static DeviceFingerprint Fingerprint() {
    DeviceFingerprint d;
    d.name = "Fake GPU";
    d.cc_major = 9;
    return d;
  }
};

class PipelineReproTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions so;
    so.path = TestDir("store") + "/k.db";
    store_ = *Store::Open(so);
    repro_dir_ = TestDir("repro");
  }
  std::unique_ptr<Pipeline> MakePipeline(Compiler* compiler, Runner* runner = nullptr, int per_request = 4) {
    PipelineDeps deps;
    deps.compiler = compiler;
    deps.store = store_.get();
    deps.metrics = metrics_.get();
    deps.runner = runner;
    if (runner != nullptr) deps.device = FakeRunner::Fingerprint();
    PipelineOptions po;
    po.repro_dir = repro_dir_;
    po.repro_limits.per_request = per_request;
    return std::make_unique<Pipeline>(std::move(deps), po);
  }
  std::vector<ReproInfo> Bundles() {
    std::vector<ReproInfo> out;
    for (const std::string& name : Entries(repro_dir_)) {
      absl::StatusOr<ReproInfo> info = ReadReproBundle(repro_dir_ + "/" + name);
      EXPECT_TRUE(info.ok()) << name << ": " << info.status();
      if (info.ok()) out.push_back(*std::move(info));
    }
    return out;
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<Metrics> metrics_ = *Metrics::Create("");
  std::string repro_dir_;
};

TEST_F(PipelineReproTest, AFailedHeuristicCompileLeavesABundleTheReplayRegenerates) {
  FakeCompiler failing(/*fail=*/true);
  auto pipeline = MakePipeline(&failing);
  const v1::CompileRequest request = Relu(3.0);
  absl::StatusOr<Prepared> p = pipeline->Prepare(request);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<v1::CompileResponse> built = pipeline->Build(*p, {}, nullptr);
  ASSERT_EQ(built.status().code(), absl::StatusCode::kInternal);

  std::vector<ReproInfo> bundles = Bundles();
  ASSERT_EQ(bundles.size(), 1u);
  const ReproInfo& b = bundles[0];
  EXPECT_EQ(b.kind, ReproKind::kCompileError);
  EXPECT_THAT(b.message, HasSubstr("expected a \";\""));
  EXPECT_EQ(b.key, p->key.ArtifactKey());
  EXPECT_EQ(b.arch, p->arch);
  EXPECT_EQ(b.nvrtc_version, "fake-1");
  EXPECT_FALSE(b.compile_options.empty());
  EXPECT_FALSE(b.device.has_value());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(b.chain, request.chain()));
  EXPECT_EQ(b.variant, FamilyHeuristic(p->chain, p->partition.kernels[0]));
  // What `kfuse repro` does: this build regenerates exactly kernel.cu.
  absl::StatusOr<ReproKernel> k = ReproKernelOf(b);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<KernelSpec> again = EmitFamily(k->chain, k->group, b.variant, b.numerics);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, b.source);
  EXPECT_EQ(again->entry, b.entry);
}

// A refusal for capacity (a source over NVRTC's limit, a full compile
// queue) is no compiler bug: no bundle, so clients cannot push real ones out.
TEST_F(PipelineReproTest, ACapacityRefusalLeavesNoBundle) {
  FakeCompiler refusing(/*fail=*/false, absl::ResourceExhaustedError("generated source is over 4 MiB"));
  auto pipeline = MakePipeline(&refusing);
  absl::StatusOr<Prepared> p = pipeline->Prepare(Relu(3.0));
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<v1::CompileResponse> built = pipeline->Build(*p, {}, nullptr);
  ASSERT_EQ(built.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Bundles(), IsEmpty());
}

TEST_F(PipelineReproTest, AStoredDecisionThatNoLongerCompilesLeavesABundle) {
  FakeCompiler good(/*fail=*/false);
  const v1::CompileRequest request = Relu(4.0);
  {
    auto pipeline = MakePipeline(&good);
    absl::StatusOr<Prepared> p = pipeline->Prepare(request);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(pipeline->Build(*p, {}, nullptr).ok());
  }
  EXPECT_TRUE(Entries(repro_dir_).empty());
  FakeCompiler failing(/*fail=*/true);  // Same version: the stored decision applies.
  auto pipeline = MakePipeline(&failing);
  absl::StatusOr<Prepared> p = pipeline->Prepare(request);
  ASSERT_TRUE(p.ok());
  // The stored decision does not compile, so the build tunes afresh, whose
  // heuristic variant fails too: a bundle for each.
  EXPECT_EQ(pipeline->Build(*p, {}, nullptr).status().code(), absl::StatusCode::kInternal);
  std::vector<ReproInfo> bundles = Bundles();
  ASSERT_EQ(bundles.size(), 2u);
  for (const ReproInfo& b : bundles) {
    EXPECT_EQ(b.kind, ReproKind::kCompileError);
    EXPECT_FALSE(b.source.empty());
  }
}

TEST_F(PipelineReproTest, FailingTrialsLeaveOneBundlePerKindAndAFewAtMost) {
  FakeCompiler good(/*fail=*/false);
  FakeRunner runner;
  auto pipeline = MakePipeline(&good, &runner);
  v1::CompileRequest request = Relu(5.0);
  request.mutable_policy()->set_mode(v1::TuningPolicy::MODE_FULL);
  absl::StatusOr<Prepared> p = pipeline->Prepare(request);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->can_tune);
  absl::StatusOr<v1::CompileResponse> built = pipeline->Build(*p, {}, nullptr);
  ASSERT_TRUE(built.ok()) << built.status();

  std::vector<ReproInfo> bundles = Bundles();
  std::multiset<ReproKind> kinds;
  for (const ReproInfo& b : bundles) {
    kinds.insert(b.kind);
    EXPECT_THAT(b.message, HasSubstr("failed"));
    ASSERT_TRUE(b.device.has_value());
    EXPECT_EQ(b.device->name, "Fake GPU");
    EXPECT_FALSE(b.source.empty());
    EXPECT_NE(b.variant, FamilyHeuristic(p->chain, p->partition.kernels[0]));  // The seed passed.
  }
  EXPECT_EQ(kinds,
            (std::multiset<ReproKind>{ReproKind::kWrongResult, ReproKind::kFault, ReproKind::kTimeout}));
  // The plan counts them: every failed trial by outcome, the most frequent
  // (the cycle's two wrong results in five) first; OK trials are not listed.
  const v1::Provenance& prov = built->plan().provenance();
  ASSERT_GE(prov.trials(), 5u);
  ASSERT_EQ(prov.failed_trials_size(), 3) << prov.DebugString();
  EXPECT_EQ(prov.failed_trials(0).outcome(), v1::Trial::OUTCOME_WRONG_RESULT);
  std::map<int, uint32_t> failed;
  uint32_t total = 0;
  for (const v1::TrialOutcomeCount& c : prov.failed_trials()) {
    failed[c.outcome()] = c.count();
    total += c.count();
  }
  EXPECT_GE(failed[v1::Trial::OUTCOME_WRONG_RESULT], failed[v1::Trial::OUTCOME_FAULT]);
  EXPECT_GE(failed[v1::Trial::OUTCOME_FAULT], 1u);
  EXPECT_GE(failed[v1::Trial::OUTCOME_TIMEOUT], 1u);
  EXPECT_LT(total, prov.trials());  // The OK ones are not counted.
  // kfuse_trials_total counts them by outcome; a wrong result is a trial
  // outcome, not a refused entry.
  const std::string text = metrics_->Text();
  EXPECT_THAT(text, HasSubstr(absl::StrCat("kfuse_trials_total{outcome=\"wrong_result\"} ",
                                           failed[v1::Trial::OUTCOME_WRONG_RESULT])));
  EXPECT_THAT(text, HasSubstr("kfuse_trials_total{outcome=\"ok\"} "));
  EXPECT_THAT(text, Not(HasSubstr("kfuse_verification_failures_total{")));

  // At most `per_request` per request.
  fs::remove_all(repro_dir_);
  auto capped = MakePipeline(&good, &runner, /*per_request=*/1);
  request.mutable_policy()->set_force(true);
  p = capped->Prepare(request);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(capped->Build(*p, {}, nullptr).ok());
  EXPECT_EQ(Bundles().size(), 1u);
}

// Right at the tuning bucket, wrong at every other size.
class RightOnlyAtTheBucket : public FakeRunner {
 public:
  absl::StatusOr<std::vector<Trial>> Run(const CheckTask& task,
                                         const std::function<void(const Trial&)>& on_trial) override {
    if (bucket_.empty()) bucket_ = task.symbol_values;
    std::vector<Trial> trials(task.candidates.size());
    for (Trial& t : trials) {
      const bool right = task.symbol_values == bucket_;
      t.outcome = right ? Outcome::kOk : Outcome::kWrongResult;
      t.median_seconds = 1e-5;
      t.message = right ? "max error 0" : "y: max abs error 1 exceeds tolerance 0.001";
      if (on_trial) on_trial(t);
    }
    return trials;
  }

 private:
  std::vector<int64_t> bucket_;
};

// A kernel wrong at a size other than the bucket leaves a bundle that
// replays that size, where it fails, not the bucket, where it passes.
TEST_F(PipelineReproTest, AKernelWrongAtAnotherSizeLeavesABundleOfThatSize) {
  FakeCompiler good(/*fail=*/false);
  RightOnlyAtTheBucket runner;
  auto pipeline = MakePipeline(&good, &runner);
  v1::CompileRequest request = Relu(6.0);
  v1::Dim* n = request.mutable_chain()->mutable_inputs(0)->mutable_shape(0);
  n->set_symbol("n");
  n->set_hint(1000);
  absl::StatusOr<Prepared> p = pipeline->Prepare(request);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->symbol_values, (std::vector<int64_t>{1024}));
  std::vector<v1::TuneProgress> progress;
  absl::StatusOr<v1::CompileResponse> built =
      pipeline->Build(*p, [&](const v1::TuneProgress& m) { progress.push_back(m); }, nullptr);
  // Every candidate, the seed too, is wrong at 769: nothing may serve.
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInternal) << built.status();
  EXPECT_THAT(built.status().message(), HasSubstr("at \"n\"=769 (passed at \"n\"=1024)"));
  // The Tune stream said so: each trial passed at the bucket ("tune"), then
  // came again failed ("check").
  int tuned = 0, checked = 0;
  for (const v1::TuneProgress& m : progress) {
    if (m.phase() == "tune") {
      ++tuned;
      EXPECT_EQ(m.trial().outcome(), v1::Trial::OUTCOME_OK);
    } else {
      EXPECT_EQ(m.phase(), "check");
      ++checked;
      EXPECT_EQ(m.trial().outcome(), v1::Trial::OUTCOME_WRONG_RESULT);
      EXPECT_THAT(m.trial().message(), HasSubstr("at \"n\"=769 (passed at \"n\"=1024)"));
    }
  }
  EXPECT_GT(tuned, 0);
  EXPECT_EQ(checked, tuned);
  std::vector<ReproInfo> bundles = Bundles();
  ASSERT_FALSE(bundles.empty());
  for (const ReproInfo& b : bundles) {
    EXPECT_EQ(b.kind, ReproKind::kWrongResult);
    EXPECT_EQ(b.symbol_values, (std::vector<int64_t>{769})) << b.message;
  }
}

TEST_F(PipelineReproTest, AReproDirThatCannotBeWrittenNeverFailsTheRequest) {
  std::ofstream(repro_dir_ + "/file") << "in the way";
  repro_dir_ += "/file/repro";
  FakeCompiler good(/*fail=*/false);
  FakeRunner runner;
  auto pipeline = MakePipeline(&good, &runner);
  v1::CompileRequest request = Relu(6.0);
  request.mutable_policy()->set_mode(v1::TuningPolicy::MODE_FULL);
  absl::StatusOr<Prepared> p = pipeline->Prepare(request);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(pipeline->Build(*p, {}, nullptr).ok());

  // A failed compile still answers with the compile's error, not the write's.
  FakeCompiler failing(/*fail=*/true);
  auto broken = MakePipeline(&failing);
  p = broken->Prepare(Relu(7.0));
  ASSERT_TRUE(p.ok());
  absl::StatusOr<v1::CompileResponse> built = broken->Build(*p, {}, nullptr);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("expected a"));
}

TEST_F(PipelineReproTest, AChainTheGeneratorCannotGenerateYetLeavesNoBundle) {
  // An f32 matrix product: UNIMPLEMENTED (mma.sync takes 16-bit operands),
  // an answer to the client, asked again and again, not a failure to keep.
  v1::CompileRequest request;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(R"({"chain": {
      "inputs": [{"name": "x", "dtype": "DTYPE_F32", "shape": [{"size": "256"}, {"size": "1024"}]},
                 {"name": "w", "dtype": "DTYPE_F32", "shape": [{"size": "1024"}, {"size": "1024"}]}],
      "ops": [{"kind": "OP_MATMUL", "args": [{"input": 0}, {"input": 1}]}],
      "outputs": [{"name": "y", "value": {"op": 0}}]}})",
                                                          &request)
                  .ok());
  FakeCompiler good(/*fail=*/false);
  auto pipeline = MakePipeline(&good);
  absl::StatusOr<Prepared> p = pipeline->Prepare(request);
  ASSERT_TRUE(p.ok()) << p.status();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(pipeline->Build(*p, {}, nullptr).status().code(), absl::StatusCode::kUnimplemented);
  }
  EXPECT_TRUE(Entries(repro_dir_).empty());
}

TEST_F(PipelineReproTest, NoReproDirNoBundles) {
  FakeCompiler failing(/*fail=*/true);
  PipelineDeps deps;
  deps.compiler = &failing;
  deps.store = store_.get();
  Pipeline pipeline(std::move(deps), PipelineOptions{});
  absl::StatusOr<Prepared> p = pipeline.Prepare(Relu(8.0));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(pipeline.Build(*p, {}, nullptr).ok());
  EXPECT_TRUE(Entries(repro_dir_).empty());
}

}  // namespace
}  // namespace kfuse
