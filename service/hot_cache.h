// The hottest plans in memory, in front of the SQLite store: a hit then costs
// no SQLite read, no sha256 over the blob and no parse. Bounded by bytes,
// least recently used out first; the store stays the source of truth.
//
//   HotCache hot(256 << 20);
//   hot.Put(key, response);
//   std::shared_ptr<const v1::CompileResponse> r = hot.Get(key);  // null on a miss
#ifndef KFUSE_SERVICE_HOT_CACHE_H_
#define KFUSE_SERVICE_HOT_CACHE_H_

#include <list>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

class HotCache {
 public:
  explicit HotCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  std::shared_ptr<const v1::CompileResponse> Get(const std::string& key);
  // With `generation`, the entry is kept only if no Clear() happened since
  // generation() returned it: a reader that fetched the value from the store
  // before a delete cannot bring the deleted plan back.
  void Put(const std::string& key, std::shared_ptr<const v1::CompileResponse> response,
           std::optional<uint64_t> generation = std::nullopt);
  void Clear();
  // Forgets `key`'s entry; like Clear, drops Puts of any key fetched before.
  void Erase(const std::string& key);
  uint64_t generation() const;
  int64_t bytes() const;

 private:
  struct Entry {
    std::shared_ptr<const v1::CompileResponse> response;
    int64_t bytes;
    std::list<std::string>::iterator age;
  };

  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> ages_ ABSL_GUARDED_BY(mu_);  // Front: most recent.
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kfuse

#endif  // KFUSE_SERVICE_HOT_CACHE_H_
