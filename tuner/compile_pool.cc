#include "tuner/compile_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace kfuse {

CompilePool::CompilePool(Compiler& compiler, int threads, int max_queue)
    : compiler_(compiler), max_queue_(static_cast<size_t>(max_queue)) {
  KFUSE_CHECK(threads >= 1);
  KFUSE_CHECK(max_queue >= 1);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

CompilePool::~CompilePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  room_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

absl::Status CompilePool::Submit(KernelSpec spec, CompileOptions opts,
                                 std::shared_ptr<std::atomic<bool>> cancel,
                                 Done done) {
  KFUSE_CHECK(done != nullptr);
  Job job;
  job.spec = std::move(spec);
  job.opts = std::move(opts);
  job.cancel = cancel.get();
  job.owned_cancel = std::move(cancel);
  job.done = std::move(done);
  return Enqueue(std::move(job), /*wait_for_room=*/false);
}

absl::Status CompilePool::Enqueue(Job job, bool wait_for_room) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait_for_room) {
      room_cv_.wait(lock,
                    [this] { return stopping_ || queue_.size() < max_queue_; });
    }
    if (stopping_) {
      return absl::FailedPreconditionError("compile pool is shutting down");
    }
    if (queue_.size() >= max_queue_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "compile queue is full (", max_queue_, " waiting); retry later"));
    }
    queue_.push_back(std::move(job));
  }
  work_cv_.notify_one();
  return absl::OkStatus();
}

void CompilePool::WorkerLoop() {
  for (;;) {
    Job job;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // Stopping and drained.
      job = std::move(queue_.front());
      queue_.pop_front();
      stopping = stopping_;
    }
    room_cv_.notify_one();
    if (stopping) {
      job.done(
          absl::CancelledError("compile pool shut down before the job ran"));
    } else if (job.cancel != nullptr && job.cancel->load()) {
      job.done(absl::CancelledError(absl::StrCat("compile of ", job.spec.entry,
                                                 " cancelled before start")));
    } else {
      job.done(compiler_.Compile(job.spec, job.opts, job.cancel));
    }
  }
}

std::vector<absl::StatusOr<CompiledKernel>> CompilePool::CompileAll(
    const std::vector<KernelSpec>& specs, const CompileOptions& opts,
    const std::atomic<bool>* cancel) {
  std::vector<absl::StatusOr<CompiledKernel>> results(
      specs.size(), absl::UnknownError("not compiled"));
  std::mutex done_mu;
  std::condition_variable done_cv;
  size_t pending = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    Job job;
    job.spec = specs[i];
    job.opts = opts;
    job.cancel = cancel;
    job.done = [&, i](absl::StatusOr<CompiledKernel> r) {
      std::lock_guard<std::mutex> lock(done_mu);
      results[i] = std::move(r);
      if (--pending == 0) done_cv.notify_all();
    };
    {
      std::lock_guard<std::mutex> lock(done_mu);
      ++pending;
    }
    absl::Status s = Enqueue(std::move(job), /*wait_for_room=*/true);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(done_mu);
      results[i] = s;
      --pending;
    }
  }
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return pending == 0; });
  return results;
}

int CompilePool::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

}  // namespace kfuse
