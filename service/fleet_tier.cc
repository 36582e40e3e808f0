#include "service/fleet_tier.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status.h"

namespace kfuse {
namespace {

std::string KeyOf(Store::Kind kind, const CacheKey& key) {
  return kind == Store::Kind::kDecision ? key.DecisionKey() : key.ArtifactKey();
}

// OK when `e`, read for (kind, k), may be used: the row asked for, its key
// the hash of its parts, signed by a trusted key over a blob that matches
// its sha256. Otherwise why not, with *what the check that failed (a
// verification-failure metric label): "fleet_key", "fleet_signature", or
// "fleet_blob" for a signed entry whose blob's bytes are not the ones
// signed (damaged or rewritten in the shared database).
absl::Status Verify(Store::Kind kind, const std::string& k, const v1::StoreEntry& e, const TrustedKeys& trusted,
                    const char** what) {
  *what = "fleet_key";
  if (e.key() != k || e.kind() != (kind == Store::Kind::kDecision ? "decision" : "artifact")) {
    return absl::InvalidArgumentError("entry filed under another key");
  }
  KFUSE_RETURN_IF_ERROR(CheckEntryKey(e));
  absl::Status verified = VerifyStoreEntry(e, trusted);
  *what = absl::IsDataLoss(verified) ? "fleet_blob" : "fleet_signature";
  return verified;
}

}  // namespace

FleetTier::FleetTier(std::unique_ptr<FleetStore> fleet, const SigningKey* signing_key, TrustedKeys trusted,
                     Metrics* metrics, FleetTierOptions options)
    : fleet_(std::move(fleet)),
      signing_key_(signing_key),
      trusted_(std::move(trusted)),
      metrics_(metrics != nullptr ? metrics : &NullMetrics()),
      options_(std::move(options)) {
  if (signing_key_ != nullptr) trusted_.Add(signing_key_->public_key);
  for (const PublicKey& k : trusted_.keys()) signers_.emplace_back(k.bytes.begin(), k.bytes.end());
  watcher_ = std::thread([this] { Watch(); });
}

FleetTier::~FleetTier() {
  {
    absl::MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  watcher_.join();
}

void FleetTier::Watch() {
  // The first look connects at start-up, so a wrong DSN shows in the log at
  // once rather than at the first miss.
  bool first = true;
  const double renew_every = options_.lease_seconds / 3;
  const auto renewal_period =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(renew_every));
  auto next_renewal = std::chrono::steady_clock::now() + renewal_period;
  absl::MutexLock lock(&stop_mu_);
  while (!stop_) {
    if (first || !fleet_->up()) {
      stop_mu_.Unlock();
      (void)fleet_->Ping();  // Success or failure is reported by the store.
      stop_mu_.Lock();
      first = false;
    }
    if (std::chrono::steady_clock::now() >= next_renewal) {
      stop_mu_.Unlock();
      RenewLeases();
      stop_mu_.Lock();
      next_renewal = std::chrono::steady_clock::now() + renewal_period;
    }
    stop_mu_.AwaitWithTimeout(absl::Condition(&stop_),
                              absl::Seconds(std::max(0.01, std::min(options_.watch_seconds, renew_every))));
  }
}

void FleetTier::RenewLeases() {
  // One statement for every lease held, made outside the lock: it only
  // extends leases still ours, so one given back meanwhile stays free.
  std::vector<std::string> keys;
  {
    absl::MutexLock lock(&held_mu_);
    for (const auto& [key, state] : held_) {
      if (!state.lost) keys.push_back(key);
    }
  }
  if (keys.empty()) return;
  absl::StatusOr<std::vector<std::string>> renewed = fleet_->RenewLeases(keys, options_.lease_seconds);
  if (!renewed.ok()) {
    // An outage is kfuse_fleet_up; a login found unable to write was said
    // once by the store (fleet_login_read_only).
    if (!absl::IsUnavailable(renewed.status()) && !read_only()) metrics_->FleetError("lease");
    return;
  }
  absl::flat_hash_set<std::string> ours(renewed->begin(), renewed->end());
  absl::MutexLock lock(&held_mu_);
  for (const std::string& key : keys) {
    auto it = held_.find(key);
    if (ours.contains(key) || it == held_.end() || it->second.lost) continue;
    // It lapsed (the database was away longer than a lease) and another
    // node took it, or it was given back under a job of this node still
    // building: both build, and both publish (readers take the first
    // published that serves them). Counted once.
    it->second.lost = true;
    metrics_->FleetLease("lost");
    LogEvent(LogLevel::kWarning, "fleet_lease_lost", {{"key", key}});
  }
}

bool FleetTier::ReportRejection(const std::string& id) {
  constexpr size_t kMaxRemembered = 4096;
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&reported_mu_);
  auto [it, fresh] = reported_.try_emplace(id, now);
  if (!fresh && now - it->second < std::chrono::minutes(1)) return false;
  if (fresh && reported_.size() > kMaxRemembered) {
    reported_.clear();
    reported_.emplace(id, now);
  }
  it = reported_.find(id);
  it->second = now;
  return true;
}

std::optional<v1::StoreEntry> FleetTier::Fetch(Store::Kind kind, const CacheKey& key, const Serves& serves,
                                               absl::flat_hash_set<std::string>* rejected) {
  const std::string k = KeyOf(kind, key);
  absl::StatusOr<std::vector<v1::StoreEntry>> got = fleet_->Get(kind, k, signers_);
  if (!got.ok()) {
    if (!absl::IsUnavailable(got.status())) {
      metrics_->FleetError("get");
      LogEvent(LogLevel::kWarning, "fleet_read_failed", {{"key", k}, {"error", got.status().ToString()}});
    }
    return std::nullopt;
  }
  for (v1::StoreEntry& e : *got) {
    const std::string id = absl::StrCat(e.signer(), e.signature());
    if (rejected != nullptr && rejected->contains(id)) continue;
    const char* what = nullptr;
    if (absl::Status ok = Verify(kind, k, e, trusted_, &what); !ok.ok()) {
      if (rejected != nullptr) rejected->insert(id);
      if (ReportRejection(absl::StrCat(k, id))) {
        metrics_->VerificationFailure(what);
        LogEvent(LogLevel::kWarning, "fleet_entry_rejected",
                 {{"key", k},
                  {"node", e.node()},
                  {"signer", absl::BytesToHexString(e.signer())},
                  {"error", ok.ToString()}});
      }
      continue;
    }
    if (serves && !serves(e)) continue;  // E.g. a heuristic entry for a request that wants tuning.
    return std::move(e);
  }
  return std::nullopt;
}

std::string FleetTier::Probe(const CacheKey& key) {
  const std::string k = key.ArtifactKey();
  absl::StatusOr<std::vector<v1::StoreEntry>> got = fleet_->Get(Store::Kind::kArtifact, k, signers_);
  if (!got.ok()) return "unavailable";
  for (const v1::StoreEntry& e : *got) {
    const char* what = nullptr;
    if (Verify(Store::Kind::kArtifact, k, e, trusted_, &what).ok()) return "hit";
  }
  if (!got->empty()) return "rejected";
  absl::StatusOr<int64_t> others = fleet_->Count(Store::Kind::kArtifact, k);
  if (!others.ok()) return "unavailable";
  return *others > 0 ? "rejected" : "miss";
}

void FleetTier::Publish(Store::Kind kind, const CacheKey& key, const EntryMeta& meta, const std::string& blob) {
  if (read_only() || signing_key_ == nullptr) return;
  EntryOrigin origin = options_.origin;
  origin.created_unix_ms = absl::ToUnixMillis(absl::Now());
  v1::StoreEntry e = MakeStoreEntry(kind, key, meta, blob, origin);
  SignStoreEntry(*signing_key_, &e);
  absl::StatusOr<bool> published = fleet_->Publish(e);
  // An outage was logged once when it began and is kfuse_fleet_up; each
  // entry it costs is neither an error event nor an error count, as for
  // reads and leases. Nor is each entry a login that cannot write does not
  // publish: the store said that once (fleet_login_read_only).
  if (!published.ok()) {
    if (!absl::IsUnavailable(published.status()) && !read_only()) {
      metrics_->FleetError("publish");
      LogEvent(LogLevel::kWarning, "fleet_publish_failed",
               {{"key", e.key()}, {"error", published.status().ToString()}});
    }
    return;
  }
  if (!*published) CheckOwnSlot(kind, e);
}

void FleetTier::CheckOwnSlot(Store::Kind kind, const v1::StoreEntry& mine) {
  // Usually this node's own entry, or another's that signs with the same
  // key (both built the key). But a row a writer without the key filed
  // under this signer holds the slot for good, and readers only pass it
  // over: say so where the owner looks.
  absl::StatusOr<std::vector<v1::StoreEntry>> got = fleet_->Get(kind, mine.key(), {mine.signer()});
  if (!got.ok()) return;
  for (const v1::StoreEntry& held : *got) {
    const char* what = nullptr;
    absl::Status ok = Verify(kind, mine.key(), held, trusted_, &what);
    if (ok.ok()) continue;
    metrics_->FleetError("publish_blocked");
    LogEvent(LogLevel::kWarning, "fleet_publish_blocked",
             {{"key", mine.key()},
              {"signer", absl::BytesToHexString(mine.signer())},
              {"node", held.node()},
              {"error", ok.ToString()},
              {"fix", "delete the row (docs/cache.md, Fleet tier)"}});
  }
}

FleetTier::Turn FleetTier::AwaitTurn(const CacheKey& key, const std::atomic<bool>* cancel, const Serves& serves,
                                     std::optional<double> tuning_seconds) {
  Turn turn;
  if (read_only()) return turn;
  const std::string lease_key = key.ArtifactKey();
  const double wait = tuning_seconds ? options_.lease_seconds + std::max(*tuning_seconds, 0.0)
                                     : std::min(options_.lease_seconds, options_.untuned_wait_seconds);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
  // An entry rejected here (a forged signature, say) does not stop another
  // signer's from arriving under the key, so the wait looks on; each such
  // entry is verified once a wait (and reported once a minute, Fetch).
  absl::flat_hash_set<std::string> rejected;
  auto fetch = [&] { return Fetch(Store::Kind::kArtifact, key, serves, &rejected); };
  bool waited = false;
  while ((cancel == nullptr || !cancel->load()) && std::chrono::steady_clock::now() < give_up) {
    absl::StatusOr<bool> ours = fleet_->TryLease(lease_key, options_.lease_seconds);
    if (!ours.ok()) {
      // Down, or refused: build here rather than wait on a database. A
      // refusal (out of disk, say) is said, once a minute at most: every
      // key is then built on every node. A login found unable to write was
      // said once by the store (fleet_login_read_only).
      if (!absl::IsUnavailable(ours.status()) && !read_only()) {
        metrics_->FleetError("lease");
        if (ReportRejection("lease-refused")) {
          LogEvent(LogLevel::kWarning, "fleet_lease_failed",
                   {{"key", lease_key}, {"error", ours.status().ToString()}, {"now", "building here without a lease"}});
        }
      }
      return turn;
    }
    if (*ours) {
      turn.leased = true;
      {
        absl::MutexLock lock(&held_mu_);
        Held& h = held_[lease_key];
        ++h.jobs;
        h.lost = false;  // Taken (again) just now.
      }
      metrics_->FleetLease(waited ? "expired" : "acquired");
      // Another node may have published and let go between this node's
      // miss and its lease: look once more before building.
      turn.arrived = fetch();
      return turn;
    }
    if (!waited) metrics_->FleetLease("held_elsewhere");
    waited = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_seconds));
    if (std::optional<v1::StoreEntry> e = fetch()) {
      metrics_->FleetLease("waited");
      turn.arrived = std::move(e);
      return turn;
    }
  }
  return turn;
}

void FleetTier::EndTurn(const CacheKey& key, const Turn& turn) {
  if (!turn.leased) return;
  {
    absl::MutexLock lock(&held_mu_);
    auto it = held_.find(key.ArtifactKey());
    if (it != held_.end()) {
      // Another job of this node (the same holder) still builds the key: the
      // lease stays, and stays renewed.
      if (--it->second.jobs > 0) return;
      held_.erase(it);
    }
  }
  // A lease that cannot be given back lapses after lease_seconds.
  if (absl::Status s = fleet_->ReleaseLease(key.ArtifactKey()); !s.ok() && !absl::IsUnavailable(s)) {
    LogEvent(LogLevel::kWarning, "fleet_lease_release_failed", {{"key", key.ArtifactKey()}, {"error", s.ToString()}});
  }
}

}  // namespace kfuse
