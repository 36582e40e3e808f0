// One job per key: identical concurrent requests wait on the same compile or
// tuning job. A caller leaving (deadline, cancellation) ends its wait, not the
// job; a job nobody waits for is cancelled unless it was asked for as
// background work.
//
//   bool started;
//   JobTable::Ticket t = jobs.Join(key, background, /*background_pool=*/background, on_done,
//                                  on_progress, &started);
//   if (started) pool.Submit([&] { jobs.Finish(t.job, Run(t.job->cancel)); });
//   ...
//   jobs.Leave(t);   // the caller's deadline passed
#ifndef KFUSE_SERVICE_JOBS_H_
#define KFUSE_SERVICE_JOBS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

class JobTable {
 public:
  using Result = absl::StatusOr<v1::CompileResponse>;
  // `joined`: the waiter joined a job another request started.
  using DoneFn = std::function<void(const Result&, bool joined)>;
  using ProgressFn = std::function<void(const v1::TuneProgress&)>;

  struct Job {
    std::string key;
    std::atomic<bool> cancel{false};
    // Set when a thread takes the job up; until then it waits in its pool's
    // queue.
    std::atomic<bool> started{false};
    bool background = false;  // Guarded by the table's mutex.
    bool background_pool = false;  // Which pool runs it; set when the job is made.
    std::map<int, std::pair<DoneFn, ProgressFn>> waiters;  // Guarded likewise; 0 started it.
    int next_waiter = 0;
  };
  struct Ticket {
    std::shared_ptr<Job> job;
    int waiter = -1;
  };

  // Joins the job for `key`, starting one if none runs (*started is then
  // true and the caller must run it, on the background pool if
  // `background_pool`, and call Finish). `background`: the job goes on when
  // every waiter left.
  Ticket Join(const std::string& key, bool background, bool background_pool, DoneFn done, ProgressFn progress,
              bool* started);
  // Joins the job for `key` if one runs; a ticket without a job otherwise.
  Ticket JoinExisting(const std::string& key, bool background, DoneFn done, ProgressFn progress);
  // The waiter stops waiting; its callbacks will not be called. A job left
  // with no waiter (and not background work) is cancelled and leaves the
  // table, so a retry starts a fresh job instead of joining a doomed one.
  void Leave(const Ticket& t);
  // Sends a progress message to every waiter.
  void Progress(const std::shared_ptr<Job>& job, const v1::TuneProgress& msg);
  // Ends the job: every waiter's done callback runs with the result.
  void Finish(const std::shared_ptr<Job>& job, const Result& result);
  // Sets every job's cancel flag, background work's too (shutdown); the
  // number of jobs in the table.
  int CancelAll();
  // Jobs in the table that wait for a thread of the background pool (or the
  // other): those somebody still waits for, or background work. A job every
  // caller left has left the table, so it no longer takes a queue place.
  int Waiting(bool background_pool) const;


 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kfuse

#endif  // KFUSE_SERVICE_JOBS_H_
