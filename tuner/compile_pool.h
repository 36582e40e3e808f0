// Bounded parallel compiles: NVRTC takes ~100 ms and tens of MB per kernel,
// so the tuner compiles variants on a fixed number of threads behind a queue
// that refuses work instead of growing without bound.
//
//   NvrtcCompiler nvrtc;
//   CompilePool pool(nvrtc, /*threads=*/4, /*max_queue=*/256);
//   auto results = pool.CompileAll(variant_specs, opts, &job_cancelled);
//   // or, asynchronously:
//   absl::Status s = pool.Submit(spec, opts, cancel,
//       [](absl::StatusOr<CompiledKernel> k) { ... });  // on a pool thread
//
// Shutdown: the destructor stops taking work, completes every queued job with
// Cancelled (on a pool thread, without compiling), lets running compiles
// finish and joins. Callbacks must not destroy the pool or call CompileAll.
#ifndef KFUSE_TUNER_COMPILE_POOL_H_
#define KFUSE_TUNER_COMPILE_POOL_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tuner/compiler.h"

namespace kfuse {

class CompilePool {
 public:
  using Done = std::function<void(absl::StatusOr<CompiledKernel>)>;

  // threads >= 1 and max_queue >= 1 (checked). `compiler` must outlive the
  // pool and be thread safe.
  CompilePool(Compiler& compiler, int threads, int max_queue);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  // Enqueues one compile; `done` runs exactly once, on a pool thread, when
  // Submit returned OK. ResourceExhausted when max_queue jobs already wait;
  // FailedPrecondition once the pool is shutting down. A job whose `cancel`
  // (may be null) is set before it starts completes with Cancelled without
  // compiling.
  absl::Status Submit(KernelSpec spec, CompileOptions opts,
                      std::shared_ptr<std::atomic<bool>> cancel, Done done);

  // Compiles all specs and waits; results in the order of `specs`. Waits for
  // queue room rather than failing, so it never returns ResourceExhausted
  // for a full queue. Call from outside the pool's threads.
  std::vector<absl::StatusOr<CompiledKernel>> CompileAll(
      const std::vector<KernelSpec>& specs, const CompileOptions& opts,
      const std::atomic<bool>* cancel = nullptr);

  // Jobs waiting to start (running ones not counted).
  int queue_depth() const;

 private:
  struct Job {
    KernelSpec spec;
    CompileOptions opts;
    std::shared_ptr<std::atomic<bool>> owned_cancel;  // Keeps Submit's alive.
    const std::atomic<bool>* cancel = nullptr;
    Done done;
  };

  // Adds a job; with `wait_for_room`, blocks until the queue has room.
  absl::Status Enqueue(Job job, bool wait_for_room);
  void WorkerLoop();

  Compiler& compiler_;
  const size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // Queue non-empty or stopping.
  std::condition_variable room_cv_;  // Queue has room or stopping.
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kfuse

#endif  // KFUSE_TUNER_COMPILE_POOL_H_
