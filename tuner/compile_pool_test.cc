// Tests for CompilePool with a fake compiler (deterministic concurrency), and
// one real-NVRTC run that prints pool throughput.
#include "tuner/compile_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

using namespace std::chrono_literals;

// Blocks every Compile until Release(); counts calls and peak concurrency.
// With `wait_for_peers` > 0, each call also waits (up to 10 s) until that
// many calls are inside Compile at once, so a pool that serialises fails.
class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(int wait_for_peers = 0, bool start_released = false)
      : wait_for_peers_(wait_for_peers), released_(start_released) {}

  absl::StatusOr<CompiledKernel> Compile(const KernelSpec& spec,
                                         const CompileOptions& opts,
                                         const std::atomic<bool>*) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++calls_;
    ++active_;
    peak_ = std::max(peak_, active_);
    cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] {
      return released_ && (wait_for_peers_ == 0 || peak_ >= wait_for_peers_);
    });
    --active_;
    if (spec.entry == "fail") return absl::InternalError("fake compile error");
    CompiledKernel k;
    k.spec = spec;
    k.arch = opts.arch;
    k.cubin =
        "\x7f"
        "ELF" +
        spec.entry;
    return k;
  }
  std::string Version() const override { return "fake-1.0"; }

  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // Waits until `n` calls are inside Compile.
  bool WaitActive(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return active_ >= n; });
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  int peak() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }

 private:
  const int wait_for_peers_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_;
  int calls_ = 0, active_ = 0, peak_ = 0;
};

KernelSpec Named(const std::string& entry) {
  KernelSpec s;
  s.entry = entry;
  s.source = "extern \"C\" __global__ void " + entry + "() {}";
  return s;
}

// Collects results of Submit callbacks.
struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<absl::StatusOr<CompiledKernel>> got;
  CompilePool::Done Callback() {
    return [this](absl::StatusOr<CompiledKernel> r) {
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(std::move(r));
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 10s, [&] { return got.size() >= n; });
  }
};

TEST(CompilePoolTest, BoundsQueue) {
  FakeCompiler fake;
  Results results;
  {
    CompilePool pool(fake, /*threads=*/1, /*max_queue=*/2);
    ASSERT_TRUE(pool.Submit(Named("a"), {}, nullptr, results.Callback()).ok());
    ASSERT_TRUE(fake.WaitActive(1));  // "a" runs; the queue is empty.
    EXPECT_EQ(pool.queue_depth(), 0);
    EXPECT_TRUE(pool.Submit(Named("b"), {}, nullptr, results.Callback()).ok());
    EXPECT_TRUE(pool.Submit(Named("c"), {}, nullptr, results.Callback()).ok());
    EXPECT_EQ(pool.queue_depth(), 2);
    absl::Status full =
        pool.Submit(Named("d"), {}, nullptr, results.Callback());
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
    fake.Release();
    ASSERT_TRUE(results.WaitFor(3));
    EXPECT_EQ(pool.queue_depth(), 0);
  }
  EXPECT_EQ(fake.calls(), 3);
  for (const auto& r : results.got) EXPECT_TRUE(r.ok()) << r.status();
}

TEST(CompilePoolTest, RunsThreadsInParallel) {
  constexpr int kThreads = 4;
  FakeCompiler fake(/*wait_for_peers=*/kThreads, /*start_released=*/true);
  CompilePool pool(fake, kThreads, /*max_queue=*/16);
  std::vector<KernelSpec> specs;
  for (int i = 0; i < 8; ++i) specs.push_back(Named(absl::StrCat("k", i)));
  auto start = std::chrono::steady_clock::now();
  std::vector<absl::StatusOr<CompiledKernel>> out = pool.CompileAll(specs, {});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // No 10 s waits.
  EXPECT_EQ(fake.peak(), kThreads);
  ASSERT_EQ(out.size(), specs.size());
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(out[i].ok()) << out[i].status();
    EXPECT_EQ(out[i]->spec.entry, specs[i].entry);  // Order kept.
  }
}

TEST(CompilePoolTest, CompileAllWaitsForRoomAndKeepsErrors) {
  FakeCompiler fake(0, /*start_released=*/true);
  CompilePool pool(fake, /*threads=*/2, /*max_queue=*/1);
  std::vector<KernelSpec> specs;
  for (int i = 0; i < 10; ++i) specs.push_back(Named(i == 3 ? "fail" : "ok"));
  std::vector<absl::StatusOr<CompiledKernel>> out = pool.CompileAll(specs, {});
  ASSERT_EQ(out.size(), 10u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].ok(), i != 3) << i << ": " << out[i].status();
  }
  EXPECT_EQ(out[3].status().code(), absl::StatusCode::kInternal);
}

TEST(CompilePoolTest, CancelledJobsDoNotCompile) {
  FakeCompiler fake(0, /*start_released=*/true);
  CompilePool pool(fake, 2, 8);
  Results results;
  auto cancel = std::make_shared<std::atomic<bool>>(true);
  ASSERT_TRUE(pool.Submit(Named("a"), {}, cancel, results.Callback()).ok());
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.got[0].status().code(), absl::StatusCode::kCancelled);

  std::atomic<bool> stop{true};
  auto out = pool.CompileAll({Named("b"), Named("c")}, {}, &stop);
  for (const auto& r : out) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  }
  EXPECT_EQ(fake.calls(), 0);
}

TEST(CompilePoolTest, DestructorCancelsQueuedJobs) {
  FakeCompiler fake;
  Results results;
  std::thread releaser;
  {
    CompilePool pool(fake, 1, 8);
    ASSERT_TRUE(
        pool.Submit(Named("run"), {}, nullptr, results.Callback()).ok());
    ASSERT_TRUE(fake.WaitActive(1));
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(
          pool.Submit(Named("queued"), {}, nullptr, results.Callback()).ok());
    }
    // Let the running one finish only after shutdown has begun.
    releaser = std::thread([&] {
      std::this_thread::sleep_for(50ms);
      fake.Release();
    });
  }  // Joins: every callback ran.
  releaser.join();
  ASSERT_EQ(results.got.size(), 4u);
  EXPECT_TRUE(results.got[0].ok());
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(results.got[i].status().code(), absl::StatusCode::kCancelled);
  }
  EXPECT_EQ(fake.calls(), 1);
}

// Real NVRTC: prints serial vs pooled throughput (this machine has 2 cores).
TEST(CompilePoolTest, NvrtcThroughput) {
  NvrtcCompiler nvrtc;
  std::vector<KernelSpec> specs;
  for (int i = 0; i < 8; ++i) {
    std::string e = absl::StrCat("kf_pool_", i);
    specs.push_back(Named(e));
    specs.back().source = absl::StrCat(
        "extern \"C\" __global__ void ", e,
        "(float* o, const float* a, int n) { int i = blockIdx.x * blockDim.x + "
        "threadIdx.x; if (i < n) o[i] = tanhf(a[i] * ",
        i + 2, ".f) + 1.f; }");
  }
  ASSERT_TRUE(nvrtc.Compile(specs[0], {}).ok());  // Warm up.
  for (int threads : {1, 2, 4}) {
    CompilePool pool(nvrtc, threads, 64);
    auto start = std::chrono::steady_clock::now();
    auto out = pool.CompileAll(specs, {});
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    for (const auto& r : out) ASSERT_TRUE(r.ok()) << r.status();
    std::printf(
        "[ info ] %zu NVRTC compiles on %d threads: %.0f ms (%.1f ms each)\n",
        specs.size(), threads, s * 1e3, s * 1e3 / specs.size());
  }
}

}  // namespace
}  // namespace kfuse
