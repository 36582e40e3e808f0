// A node whose GPU worker did not start with it: it answers without tuning,
// says why, and tunes once a later start works, without a restart.
#include "service/tuning_start.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "service/service_test_util.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
using service_testing::FakeCompiler;
using service_testing::FakeGpu;
using service_testing::LoopbackServer;
using service_testing::ScaledActivation;
using service_testing::TestStorePath;

// The GPU is full for the first `failures` starts, then a FakeGpu starts.
class LateGpu {
 public:
  explicit LateGpu(int failures) : failures_(failures) {}
  RetryStartRunner::StartFn Fn() {
    return [this]() -> absl::StatusOr<std::unique_ptr<Runner>> {
      if (starts_++ < failures_)
        return absl::ResourceExhaustedError("cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY");
      return std::make_unique<FakeGpu>();
    };
  }
  int starts() const { return starts_.load(); }

 private:
  const int failures_;
  std::atomic<int> starts_{0};
};

class TuningStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *Store::Open({.path = TestStorePath()});
    runner_ = std::make_unique<RetryStartRunner>(late_.Fn(), [this] { return now_.load(); });
    PipelineDeps deps;
    deps.compiler = &compiler_;
    deps.store = store_.get();
    deps.runner = runner_.get();  // No device: its GPU has not started.
    PipelineOptions po;
    po.no_gpu_reason = "not this one: the runner says why";
    pipeline_ = std::make_unique<Pipeline>(std::move(deps), po);
    starter_ = std::make_unique<TuningStarter>(runner_.get(), store_.get(), pipeline_.get(),
                                               [this] { return now_.load(); });
  }
  void TearDown() override { starter_->Stop(); }
  bool CanTune() {
    absl::StatusOr<Prepared> p = pipeline_->Prepare(ScaledActivation(v1::OP_SILU, 2.0));
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() && p->can_tune;
  }

  LateGpu late_{1};
  std::atomic<double> now_{1000};
  FakeCompiler compiler_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RetryStartRunner> runner_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<TuningStarter> starter_;
};

TEST_F(TuningStartTest, AGpuWhoseWorkerStartsLaterIsAttachedWithItsCeilings) {
  EXPECT_EQ(starter_->TryNow(), TuningStarter::Result::kRetry);
  EXPECT_EQ(pipeline_->gpu(), nullptr);
  EXPECT_THAT(pipeline_->no_gpu_reason(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY; tried again in 60 s"));
  EXPECT_FALSE(CanTune());
  const uint64_t epoch = pipeline_->AnswersEpoch();

  now_ = 1060;
  EXPECT_EQ(starter_->TryNow(), TuningStarter::Result::kAttached);
  std::shared_ptr<const TuningGpu> gpu = pipeline_->gpu();
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->device.name, "Fake GPU");
  EXPECT_EQ(gpu->runner, runner_.get());
  EXPECT_TRUE(gpu->ceilings.measured);
  EXPECT_EQ(gpu->ceilings.source, "measured on Fake GPU");
  EXPECT_EQ(pipeline_->no_gpu_reason(), "");
  EXPECT_TRUE(CanTune());
  EXPECT_NE(pipeline_->AnswersEpoch(), epoch);  // What was remembered without the GPU goes.
  // The ceilings were kept: a later start of this node reads them.
  EXPECT_EQ(StoredOrMeasuredCeilings(*store_, *runner_, gpu->device, nullptr)->source, "measured on Fake GPU");
  EXPECT_EQ(late_.starts(), 2);
}

TEST_F(TuningStartTest, ASecondGpuIsNotAttached) {
  now_ = 0;
  ASSERT_EQ(starter_->TryNow(), TuningStarter::Result::kRetry);
  now_ = 60;
  ASSERT_EQ(starter_->TryNow(), TuningStarter::Result::kAttached);
  FakeGpu other;
  absl::Status s = pipeline_->AttachGpu(TuningGpu{&other, FakeGpu::Fingerprint(), NominalCeilings(90)});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("already tunes on Fake GPU"));
  EXPECT_EQ(pipeline_->gpu()->runner, runner_.get());
  EXPECT_EQ(pipeline_->AttachGpu(TuningGpu{}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TuningStartTest, TheStarterTriesOnItsOwnThreadOnceTheBackoffHasPassed) {
  ASSERT_EQ(starter_->TryNow(), TuningStarter::Result::kRetry);
  now_ = 1060;
  starter_->Start();
  for (int i = 0; i < 500 && pipeline_->gpu() == nullptr; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(pipeline_->gpu(), nullptr);
}

TEST_F(TuningStartTest, StopEndsAStarterWaitingOutTheBackoff) {
  ASSERT_EQ(starter_->TryNow(), TuningStarter::Result::kRetry);
  starter_->Start();  // Waits 60 s of real time: the clock does not move.
  const auto start = std::chrono::steady_clock::now();
  starter_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(late_.starts(), 1);
  EXPECT_EQ(pipeline_->gpu(), nullptr);
}

// A GPU whose worker starts at once and whose ceilings take until the test
// releases them (or the caller cancels: Cancelled; 30 s at most), with the
// pipeline and starter of a node around it.
class HeldCeilingsNode {
 public:
  struct Gpu : FakeGpu {
    absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* cancel) override {
      measuring = true;
      for (int i = 0; i < 30'000 && !release.load(); ++i) {
        if (cancel != nullptr && cancel->load()) return absl::CancelledError("measuring ceilings: cancelled");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return NominalCeilings(90);
    }
    std::atomic<bool> measuring{false}, release{false};
  };

  HeldCeilingsNode(Compiler* compiler, Store* store)
      : runner([this]() -> absl::StatusOr<std::unique_ptr<Runner>> {
          auto made = std::make_unique<Gpu>();
          gpu = made.get();
          return made;
        }),
        pipeline(Deps(compiler, store, &runner), PipelineOptions{}),
        starter(&runner, store, &pipeline) {}
  // The GPU, once its ceilings are being measured.
  Gpu& Measuring() {
    while (gpu.load() == nullptr || !gpu.load()->measuring.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return *gpu.load();
  }

  std::atomic<Gpu*> gpu{nullptr};
  RetryStartRunner runner;
  Pipeline pipeline;
  TuningStarter starter;

 private:
  static PipelineDeps Deps(Compiler* compiler, Store* store, Runner* runner) {
    PipelineDeps deps;
    deps.compiler = compiler;
    deps.store = store;
    deps.runner = runner;
    return deps;
  }
};

// Between its worker's start and its ceilings measured, the GPU does not
// tune yet, and the node says so (health, GetDeviceInfo).
TEST_F(TuningStartTest, AStartedGpuWhoseCeilingsAreBeingMeasuredIsNotYetTuning) {
  HeldCeilingsNode node(&compiler_, store_.get());
  std::thread start([&] { EXPECT_EQ(node.starter.TryNow(), TuningStarter::Result::kAttached); });
  HeldCeilingsNode::Gpu& gpu = node.Measuring();
  EXPECT_EQ(node.runner.Unavailable(), std::nullopt);  // The worker takes tasks...
  EXPECT_EQ(node.pipeline.gpu(), nullptr);             // ...but the pipeline has no GPU yet,
  EXPECT_THAT(node.pipeline.no_gpu_reason(), HasSubstr("once its ceilings are measured"));  // and says why.
  gpu.release = true;
  start.join();
  EXPECT_NE(node.pipeline.gpu(), nullptr);
  EXPECT_EQ(node.pipeline.no_gpu_reason(), "");
}

// kfused stopping while a late GPU's ceilings are measured does not wait
// for them: the measurement is cancelled, the GPU not attached, nothing kept.
TEST_F(TuningStartTest, StopCancelsTheCeilingsBeingMeasured) {
  HeldCeilingsNode node(&compiler_, store_.get());
  node.starter.Start();
  node.Measuring();
  const auto start = std::chrono::steady_clock::now();
  node.starter.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(node.pipeline.gpu(), nullptr);
  absl::StatusOr<std::optional<std::string>> kept = store_->GetDecision(CeilingsKey(FakeGpu::Fingerprint()));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->has_value());
}

// A measurement that ends Cancelled though the starter was not stopped (its
// worker's start given up for the server's stop, WorkerOptions::stop) is a
// stop too: the GPU is not attached with nominal ceilings, nothing is kept.
TEST_F(TuningStartTest, CeilingsCancelledByTheServersStopAttachNothing) {
  struct StoppingGpu : FakeGpu {
    absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>*) override {
      return absl::CancelledError("tuning worker: start cancelled, the server is stopping");
    }
  };
  RetryStartRunner runner([]() -> absl::StatusOr<std::unique_ptr<Runner>> {
    return std::make_unique<StoppingGpu>();
  });
  TuningStarter starter(&runner, store_.get(), pipeline_.get());
  EXPECT_EQ(starter.TryNow(), TuningStarter::Result::kGaveUp);
  EXPECT_EQ(pipeline_->gpu(), nullptr);
  absl::StatusOr<std::optional<std::string>> kept = store_->GetDecision(CeilingsKey(FakeGpu::Fingerprint()));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->has_value());
}

TEST_F(TuningStartTest, AFailureTryingCannotHelpGivesUp) {
  RetryStartRunner missing([]() -> absl::StatusOr<std::unique_ptr<Runner>> {
    return absl::NotFoundError("tuning worker /opt/kfuse/kfuse-worker: no such file");
  });
  TuningStarter starter(&missing, store_.get(), pipeline_.get());
  EXPECT_EQ(starter.TryNow(), TuningStarter::Result::kGaveUp);
  EXPECT_EQ(pipeline_->gpu(), nullptr);
}

TEST_F(TuningStartTest, AServerAnswersWithoutTuningUntilItsGpuStartsThenTunes) {
  KernelServiceImpl service(pipeline_.get(), ServiceOptions{});
  LoopbackServer server(&service);
  ASSERT_EQ(starter_->TryNow(), TuningStarter::Result::kRetry);
  const v1::CompileRequest req = ScaledActivation(v1::OP_SILU, 3.0);
  auto compile = [&](v1::CompileResponse* resp) {
    grpc::ClientContext ctx;
    return server.stub()->Compile(&ctx, req, resp);
  };
  auto device_info = [&] {
    grpc::ClientContext ctx;
    v1::DeviceInfo info;
    EXPECT_TRUE(server.stub()->GetDeviceInfo(&ctx, v1::GetDeviceInfoRequest{}, &info).ok());
    return info;
  };

  v1::DeviceInfo info = device_info();
  EXPECT_FALSE(info.has_gpu());
  EXPECT_THAT(info.reason(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY; tried again in"));
  v1::CompileResponse before;
  ASSERT_TRUE(compile(&before).ok());
  EXPECT_EQ(before.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_THAT(before.plan().provenance().reason(), HasSubstr("no GPU"));
  ASSERT_TRUE(compile(&before).ok());  // A hit, now remembered in memory.
  EXPECT_EQ(before.plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);

  now_ = 1060;
  ASSERT_EQ(starter_->TryNow(), TuningStarter::Result::kAttached);
  info = device_info();
  EXPECT_TRUE(info.has_gpu());
  EXPECT_EQ(info.device().name(), "Fake GPU");
  EXPECT_EQ(info.reason(), "");
  // The same request, remembered in memory as answered without tuning, now tunes.
  v1::CompileResponse after;
  ASSERT_TRUE(compile(&after).ok());
  EXPECT_EQ(after.plan().provenance().state(), v1::TUNE_STATE_TUNED);
  EXPECT_EQ(after.plan().provenance().device().name(), "Fake GPU");
  service.Drain();
}

}  // namespace
}  // namespace kfuse
