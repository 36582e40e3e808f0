// A fixed pool of threads for compile and tuning jobs, so that no gRPC
// callback thread ever waits on them.
//
//   ThreadPool pool(4);
//   pool.Submit([] { ... });   // runs on a pool thread
#ifndef KFUSE_SERVICE_THREAD_POOL_H_
#define KFUSE_SERVICE_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kfuse {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  // Runs every queued task, then joins.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  int queued() const;
  // Threads not running a task now.
  int idle() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace kfuse

#endif  // KFUSE_SERVICE_THREAD_POOL_H_
