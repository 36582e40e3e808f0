#include "service/jobs.h"

#include <vector>

namespace kfuse {

JobTable::Ticket JobTable::Join(const std::string& key, bool background, bool background_pool, DoneFn done,
                                ProgressFn progress, bool* started) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Job>& job = jobs_[key];
  *started = job == nullptr;
  if (*started) {
    job = std::make_shared<Job>();
    job->key = key;
    job->background_pool = background_pool;
  }
  job->background |= background;
  int id = job->next_waiter++;
  job->waiters[id] = {std::move(done), std::move(progress)};
  return Ticket{job, id};
}

JobTable::Ticket JobTable::JoinExisting(const std::string& key, bool background, DoneFn done,
                                        ProgressFn progress) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(key);
  if (it == jobs_.end()) return {};
  std::shared_ptr<Job>& job = it->second;
  job->background |= background;
  int id = job->next_waiter++;
  job->waiters[id] = {std::move(done), std::move(progress)};
  return Ticket{job, id};
}

void JobTable::Leave(const Ticket& t) {
  absl::MutexLock lock(&mu_);
  t.job->waiters.erase(t.waiter);
  if (t.job->waiters.empty() && !t.job->background) {
    t.job->cancel = true;
    auto it = jobs_.find(t.job->key);
    if (it != jobs_.end() && it->second == t.job) jobs_.erase(it);
  }
}

int JobTable::CancelAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, job] : jobs_) job->cancel = true;
  return static_cast<int>(jobs_.size());
}

int JobTable::Waiting(bool background_pool) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, job] : jobs_) n += !job->started.load() && job->background_pool == background_pool;
  return n;
}

void JobTable::Progress(const std::shared_ptr<Job>& job, const v1::TuneProgress& msg) {
  std::vector<ProgressFn> fns;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, w] : job->waiters)
      if (w.second) fns.push_back(w.second);
  }
  for (auto& f : fns) f(msg);
}

void JobTable::Finish(const std::shared_ptr<Job>& job, const Result& result) {
  std::vector<std::pair<DoneFn, bool>> fns;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, w] : job->waiters) fns.emplace_back(std::move(w.first), id != 0);
    job->waiters.clear();
    auto it = jobs_.find(job->key);
    if (it != jobs_.end() && it->second == job) jobs_.erase(it);
  }
  for (auto& [f, joined] : fns) f(result, joined);
}

}  // namespace kfuse
