#include "service/hot_cache.h"

namespace kfuse {

std::shared_ptr<const v1::CompileResponse> HotCache::Get(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  ages_.splice(ages_.begin(), ages_, it->second.age);
  return it->second.response;
}

void HotCache::Put(const std::string& key, std::shared_ptr<const v1::CompileResponse> response,
                   std::optional<uint64_t> generation) {
  // The key counts too (it is held twice: the map's and the age list's), so
  // entries with long keys cannot grow the cache past its bound.
  int64_t size = static_cast<int64_t>(response->ByteSizeLong() + 2 * key.size());
  if (size > max_bytes_) return;
  absl::MutexLock lock(&mu_);
  if (generation && *generation != generation_) return;
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    bytes_ -= it->second.bytes;
    ages_.erase(it->second.age);
    entries_.erase(it);
  }
  ages_.push_front(key);
  entries_[key] = Entry{std::move(response), size, ages_.begin()};
  bytes_ += size;
  while (bytes_ > max_bytes_ && !ages_.empty()) {
    auto old = entries_.find(ages_.back());
    bytes_ -= old->second.bytes;
    entries_.erase(old);
    ages_.pop_back();
  }
}

uint64_t HotCache::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

void HotCache::Clear() {
  absl::MutexLock lock(&mu_);
  ++generation_;
  entries_.clear();
  ages_.clear();
  bytes_ = 0;
}

void HotCache::Erase(const std::string& key) {
  absl::MutexLock lock(&mu_);
  ++generation_;
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  bytes_ -= it->second.bytes;
  ages_.erase(it->second.age);
  entries_.erase(it);
}

int64_t HotCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace kfuse
