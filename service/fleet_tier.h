// The fleet store as a node uses it: reads that are verified before use
// (a trusted signer, a key that is the hash of its parts, a blob that
// matches its sha256), publishing signed entries after a build, and the
// tuning lease around a build so that one node of the fleet tunes a key
// while the others wait for its result. Whatever the database does, a
// request never fails because of it: a fleet that is down is a miss, and a
// build goes on locally.
//
//   FleetTier fleet(FleetStore::Create(o), &signing_key, trusted, &metrics, {});
//   if (auto e = fleet.Fetch(Store::Kind::kArtifact, key)) { ... serve it ... }
//   FleetTier::Turn t = fleet.AwaitTurn(key, cancel, serves);
//   if (t.arrived) { ... another node built it ... } else { ... build, Publish ... }
//   fleet.EndTurn(key, t);
#ifndef KFUSE_SERVICE_FLEET_TIER_H_
#define KFUSE_SERVICE_FLEET_TIER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include "absl/synchronization/mutex.h"

#include "cache/fleet.h"
#include "cache/store.h"
#include "cache/store_entry.h"
#include "core/key.h"
#include "plan/signing.h"
#include "service/metrics.h"

namespace kfuse {

struct FleetTierOptions {
  // A lease outlives a build that died with its node by at most this long.
  // The holder renews its leases every lease_seconds / 3 while it builds,
  // so a build may take longer than this.
  double lease_seconds = 120;
  double poll_seconds = 0.1;  // How often a waiting node looks for the result.
  // The longest a build that does not tune waits on another node's lease:
  // the holder's build takes what NVRTC takes, so an entry that has not come
  // by then most likely will not (its node died), and waiting out the lease
  // would outlast the caller's deadline.
  double untuned_wait_seconds = 10;
  double watch_seconds = 1.0;  // How often a node looks for a database that went away.
  EntryOrigin origin;         // This node, for the entries it publishes.
};

class FleetTier {
 public:
  // `signing_key` and `metrics` are not owned and must outlive the tier.
  FleetTier(std::unique_ptr<FleetStore> fleet, const SigningKey* signing_key, TrustedKeys trusted,
            Metrics* metrics, FleetTierOptions options);

  // Whether a verified entry serves the caller (a tuned plan for a request
  // that wants tuning, the plan the entry names, ...).
  using Serves = std::function<bool(const v1::StoreEntry&)>;
  // The first published of the key's entries by a trusted signer that
  // verifies and `serves` (any, when empty), or nullopt: a miss, the
  // database away, or entries that fail (never used; each that fails
  // verification counted and logged at most once a minute by this node, so
  // a forged row read by every request floods neither). `rejected`, where
  // given, holds the entries rejected before (by signer and signature): they
  // are passed over without being verified again, and those rejected now
  // are added.
  std::optional<v1::StoreEntry> Fetch(Store::Kind kind, const CacheKey& key, const Serves& serves = nullptr,
                                      absl::flat_hash_set<std::string>* rejected = nullptr);
  // "hit" | "miss" | "unavailable" | "rejected" (entries this node would
  // not use: by signers it does not trust, or whose key or signature does
  // not verify), for `kfuse cache explain`.
  std::string Probe(const CacheKey& key);

  // Signs and publishes an entry this node made. A failure is logged and
  // counted, never returned: the local store already has it. So is an
  // entry under this node's signer for the key that does not verify (a
  // forged row holding its place; kfuse_fleet_errors_total{op=
  // "publish_blocked"}).
  void Publish(Store::Kind kind, const CacheKey& key, const EntryMeta& meta, const std::string& blob);

  struct Turn {
    bool leased = false;  // This node holds the lease: release it after.
    // Another node's build of the key arrived while this one waited.
    std::optional<v1::StoreEntry> arrived;
  };
  // Takes the tuning lease for the artifact of `key`, or, while another node
  // holds it, waits for that node's entry that `serves` the request (or for
  // its lease to lapse, then takes it). A lease taken is renewed in the
  // background until EndTurn, so a holder that dies lets it lapse within
  // lease_seconds. Returns to build locally when the fleet is read-only or
  // down, when `cancel` is set, and after waiting lease_seconds plus
  // `tuning_seconds` (what a tuning build may take: its budget) by this
  // node's clock, whatever the database says; a build that does not tune
  // (no `tuning_seconds`) waits untuned_wait_seconds at most.
  Turn AwaitTurn(const CacheKey& key, const std::atomic<bool>* cancel, const Serves& serves,
                 std::optional<double> tuning_seconds = 0.0);
  void EndTurn(const CacheKey& key, const Turn& turn);

  ~FleetTier();

  bool read_only() const { return fleet_->read_only(); }
  FleetStore& store() { return *fleet_; }

 private:
  // While the database is away, looks for it every `watch_seconds`, so the
  // node (and kfuse_fleet_up) sees it come back even if every request hits
  // the local store; renews the leases held every lease_seconds / 3.
  void Watch();
  void RenewLeases();
  // After a publish found the slot of (kind, key, this node's signer)
  // taken: warns and counts when the entry there does not verify.
  void CheckOwnSlot(Store::Kind kind, const v1::StoreEntry& mine);

  std::unique_ptr<FleetStore> fleet_;
  const SigningKey* signing_key_;
  TrustedKeys trusted_;
  std::vector<std::string> signers_;  // trusted_'s keys as bytes, for the store's Get.
  Metrics* metrics_;
  FleetTierOptions options_;
  absl::Mutex stop_mu_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  // Leases this node holds, by artifact key: how many of its jobs hold it
  // (they share the holder) and whether a renewal found it taken.
  struct Held {
    int jobs = 0;
    bool lost = false;
  };
  absl::Mutex held_mu_;
  absl::flat_hash_map<std::string, Held> held_ ABSL_GUARDED_BY(held_mu_);
  // Whether the rejection of entry `id` (or the refusal `id` names) is to be
  // reported now: not within the last minute (a bounded map, cleared when
  // full).
  bool ReportRejection(const std::string& id);
  absl::Mutex reported_mu_;
  absl::flat_hash_map<std::string, std::chrono::steady_clock::time_point> reported_ ABSL_GUARDED_BY(reported_mu_);
  std::thread watcher_;
};

}  // namespace kfuse

#endif  // KFUSE_SERVICE_FLEET_TIER_H_
