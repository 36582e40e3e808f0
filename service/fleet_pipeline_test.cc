// Two tuning pipelines (fake GPUs of one model) sharing a throw-away
// PostgreSQL fleet store: a tuned build is published and served to the other
// node without tuning; a heuristic answer to a request for tuning (the GPU
// went away) stays local.
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/fleet_test_util.h"
#include "gtest/gtest.h"
#include "service/metrics.h"
#include "service/pipeline.h"
#include "service/service_test_util.h"

namespace kfuse {
namespace {

using service_testing::FakeCompiler;
using service_testing::FakeGpu;
using service_testing::ScaledActivation;
using service_testing::TestStorePath;

SigningKey KeyFrom(uint8_t fill) {
  std::array<uint8_t, 32> seed;
  seed.fill(fill);
  return SigningKeyFromSeed(seed);
}

// The public key of KeyFrom(fill) as the fleet store names signers.
std::string SignerFrom(uint8_t fill) {
  const PublicKey k = KeyFrom(fill).public_key;
  return std::string(k.bytes.begin(), k.bytes.end());
}

// One node: its store, fake GPU, fleet tier and pipeline.
struct Node {
  Node(const std::string& name, const std::string& dsn, uint8_t key_seed, const TrustedKeys& trusted,
       bool gpu_gone = false, std::chrono::milliseconds gpu_delay = std::chrono::milliseconds(0))
      : gpu(gpu_delay, gpu_gone), key(KeyFrom(key_seed)) {
    metrics = *Metrics::Create("");
    store = *Store::Open({.path = TestStorePath("_" + name)});
    FleetOptions fo;
    fo.dsn = dsn;
    fo.holder = name;
    FleetTierOptions to;
    to.origin = EntryOrigin{name, 0, "test"};
    fleet = std::make_unique<FleetTier>(FleetStore::Create(fo), &key, trusted, metrics.get(), to);
    PipelineDeps deps = service_testing::FakeGpuDeps(&compiler, store.get(), &gpu);
    deps.fleet = fleet.get();
    deps.metrics = metrics.get();
    PipelineOptions po;
    po.node = name;
    pipeline = std::make_unique<Pipeline>(std::move(deps), po);
  }
  absl::StatusOr<v1::CompileResponse> Compile(const v1::CompileRequest& r) {
    absl::StatusOr<Prepared> p = pipeline->Prepare(r);
    if (!p.ok()) return p.status();
    return pipeline->Build(*p, nullptr, nullptr);
  }

  std::unique_ptr<Metrics> metrics;  // Outlives the pipeline that counts into it.
  FakeCompiler compiler;
  FakeGpu gpu;
  SigningKey key;
  std::unique_ptr<Store> store;
  std::unique_ptr<FleetTier> fleet;
  std::unique_ptr<Pipeline> pipeline;
};

class FleetPipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pg_ = new testing::EphemeralPostgres(); }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(pg_->port(), 0) << pg_->error();
    // Each case starts from an empty fleet store, whether or not the cases
    // before it ran in this process.
    if (pg_->Query("SELECT to_regclass('kfuse_entries') IS NOT NULL") == "t") {
      ASSERT_EQ(pg_->Query("TRUNCATE kfuse_entries, kfuse_blobs, kfuse_leases"), "");
    }
    trusted_ = TrustedKeys({KeyFrom(1).public_key, KeyFrom(2).public_key});
  }
  // A fleet tier alone (no pipeline) named `name`, signing with `key`,
  // trusting trusted_, with leases of `lease_seconds`.
  std::unique_ptr<FleetTier> Tier(const std::string& name, const SigningKey* key, double lease_seconds,
                                  double untuned_wait_seconds = 10) {
    FleetOptions fo;
    fo.dsn = pg_->Dsn();
    fo.holder = name;
    FleetTierOptions to;
    to.lease_seconds = lease_seconds;
    to.untuned_wait_seconds = untuned_wait_seconds;
    to.origin = EntryOrigin{name, 0, "test"};
    return std::make_unique<FleetTier>(FleetStore::Create(fo), key, trusted_, metrics_.get(), to);
  }
  // Files a copy of the artifact entry under `key` claiming `signer`'s name
  // (its signature is the original signer's, so it does not verify).
  static void ForgeUnder(const std::string& key, const SigningKey& signer) {
    ASSERT_EQ(pg_->Query("INSERT INTO kfuse_entries (kind, key, chain, spec, device, toolchain, generator, family,"
                         " arch, device_name, state, description, blob_sha256, node, created_unix_ms, kfuse_version,"
                         " signer, signature) SELECT kind, key, chain, spec, device, toolchain, generator, family,"
                         " arch, device_name, state, description, blob_sha256, node, created_unix_ms, kfuse_version,"
                         " decode('" + signer.public_key.Hex() + "', 'hex'), signature FROM kfuse_entries"
                         " WHERE kind = 'artifact' AND key = '" + key + "'"),
              "");
  }
  // The bare store as a node called `holder` uses it.
  static std::unique_ptr<FleetStore> BareStore(const std::string& holder) {
    FleetOptions fo;
    fo.dsn = pg_->Dsn();
    fo.holder = holder;
    return FleetStore::Create(fo);
  }

  static testing::EphemeralPostgres* pg_;
  TrustedKeys trusted_;
  std::unique_ptr<Metrics> metrics_ = *Metrics::Create("");  // The tiers' from Tier().
};
testing::EphemeralPostgres* FleetPipelineTest::pg_ = nullptr;

TEST_F(FleetPipelineTest, ATunedBuildIsServedToAnotherNodeWithoutTuning) {
  Node a("a", pg_->Dsn(), 1, trusted_);
  Node b("b", pg_->Dsn(), 2, trusted_);
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 1.5, 1 << 20);
  absl::StatusOr<v1::CompileResponse> built = a.Compile(r);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->plan().provenance().state(), v1::TUNE_STATE_TUNED);
  ASSERT_GT(a.gpu.runs.load(), 0);
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE node = 'a' AND state = 'tuned'"), "2");

  absl::StatusOr<v1::CompileResponse> served = b.Compile(r);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->cache(), v1::CACHE_OUTCOME_FLEET_HIT);
  EXPECT_EQ(served->plan().provenance().state(), v1::TUNE_STATE_TUNED);
  EXPECT_EQ(served->plan().key(), built->plan().key());
  EXPECT_EQ(b.gpu.runs.load(), 0);
  EXPECT_EQ(b.compiler.calls.load(), 0);
}

// A node that misses while another builds the key waits on its lease and is
// answered by what it publishes: counted as a fleet miss and an arrival.
TEST_F(FleetPipelineTest, AResultThatArrivesWhileWaitingOnALeaseIsCountedAsArrived) {
  Node a("a", pg_->Dsn(), 1, trusted_, false, std::chrono::milliseconds(600));
  Node b("b", pg_->Dsn(), 2, trusted_);
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 4.5, 1 << 20);
  absl::StatusOr<v1::CompileResponse> built;
  std::thread builder([&] { built = a.Compile(r); });
  for (int i = 0; i < 100 && pg_->Query("SELECT count(*) FROM kfuse_leases") != "1"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  absl::StatusOr<v1::CompileResponse> waited = b.Compile(r);
  builder.join();
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->cache(), v1::CACHE_OUTCOME_FLEET_HIT);
  EXPECT_EQ(b.gpu.runs.load(), 0);
  const std::string text = b.metrics->Text();
  EXPECT_NE(text.find("kfuse_lookups_total{result=\"miss\",tier=\"fleet\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("kfuse_lookups_total{result=\"arrived\",tier=\"fleet\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("kfuse_fleet_leases_total{result=\"waited\"} 1"), std::string::npos) << text;
}

// The holder renews its lease while it builds, so a build longer than the
// lease keeps it; EndTurn lets it go at once.
TEST_F(FleetPipelineTest, ALeaseIsRenewedWhileItsHolderBuilds) {
  SigningKey key = KeyFrom(1);
  std::unique_ptr<FleetTier> tier = Tier("renewing", &key, 1.2);
  std::unique_ptr<FleetStore> b = BareStore("other");

  const CacheKey k{"renewed-chain", "spec", "device", "toolchain", "generator"};
  FleetTier::Turn turn = tier->AwaitTurn(k, nullptr, [](const v1::StoreEntry&) { return true; });
  ASSERT_TRUE(turn.leased);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // Two and a half leases.
  absl::StatusOr<bool> taken = b->TryLease(k.ArtifactKey(), 30);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_FALSE(*taken);
  tier->EndTurn(k, turn);
  taken = b->TryLease(k.ArtifactKey(), 30);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_TRUE(*taken);
  ASSERT_TRUE(b->ReleaseLease(k.ArtifactKey()).ok());
  EXPECT_EQ(metrics_->Text().find("kfuse_fleet_leases_total{result=\"lost\"}"), std::string::npos);
}

// A lease another node took (it lapsed while the database was away) is
// counted lost once, however many renewals find it so.
TEST_F(FleetPipelineTest, ALostLeaseIsCountedOnce) {
  SigningKey key = KeyFrom(1);
  std::unique_ptr<FleetTier> tier = Tier("losing", &key, 0.3);
  const CacheKey k{"lost-chain", "spec", "device", "toolchain", "generator"};
  FleetTier::Turn turn = tier->AwaitTurn(k, nullptr, [](const v1::StoreEntry&) { return true; });
  ASSERT_TRUE(turn.leased);
  pg_->Query("UPDATE kfuse_leases SET holder = 'thief' WHERE key = '" + k.ArtifactKey() + "'");
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // Some eight renewals.
  tier->EndTurn(k, turn);
  const std::string text = metrics_->Text();
  EXPECT_NE(text.find("kfuse_fleet_leases_total{result=\"lost\"} 1\n"), std::string::npos) << text;
  EXPECT_EQ(pg_->Query("SELECT holder FROM kfuse_leases WHERE key = '" + k.ArtifactKey() + "'"), "thief");
  pg_->Query("DELETE FROM kfuse_leases WHERE key = '" + k.ArtifactKey() + "'");  // The suite shares the table.
}

// A node waiting on a lease that its holder keeps renewing waits for the
// build's budget beyond the lease, and takes the lease once it is given back.
TEST_F(FleetPipelineTest, AWaiterWaitsOutARenewedLeaseUpToTheBuildsBudget) {
  SigningKey key_a = KeyFrom(1), key_b = KeyFrom(2);
  std::unique_ptr<FleetTier> a = Tier("holder", &key_a, 1.2), b = Tier("waiter", &key_b, 1.2);
  const CacheKey k{"waited-chain", "spec", "device", "toolchain", "generator"};
  FleetTier::Turn held = a->AwaitTurn(k, nullptr, [](const v1::StoreEntry&) { return true; });
  ASSERT_TRUE(held.leased);

  std::atomic<bool> returned{false};
  FleetTier::Turn waited;
  std::thread waiter([&] {
    waited = b->AwaitTurn(k, nullptr, [](const v1::StoreEntry&) { return true; }, /*build_seconds=*/10);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // Past the lease, within the budget.
  EXPECT_FALSE(returned.load());
  a->EndTurn(k, held);
  waiter.join();
  EXPECT_TRUE(waited.leased);
  EXPECT_FALSE(waited.arrived.has_value());
  b->EndTurn(k, waited);
}

// A build that does not tune (a server without a GPU) waits on another
// node's lease only as long as such a build takes: a holder that died
// leaves its lease for minutes, which would outlast the caller's deadline.
TEST_F(FleetPipelineTest, ABuildThatDoesNotTuneWaitsOnALeaseOnlyBriefly) {
  SigningKey key_a = KeyFrom(1), key_b = KeyFrom(2);
  std::unique_ptr<FleetTier> a = Tier("dead-holder", &key_a, 60), b = Tier("untuned", &key_b, 60, 0.5);
  const CacheKey k{"untuned-chain", "spec", "device", "toolchain", "generator"};
  FleetTier::Turn held = a->AwaitTurn(k, nullptr, [](const v1::StoreEntry&) { return true; });
  ASSERT_TRUE(held.leased);  // Never given back while b waits: as if its node died.
  const auto t0 = std::chrono::steady_clock::now();
  FleetTier::Turn waited = b->AwaitTurn(k, nullptr, [](const v1::StoreEntry&) { return true; }, std::nullopt);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(waited.leased);
  EXPECT_FALSE(waited.arrived.has_value());
  EXPECT_GE(took, std::chrono::milliseconds(450));
  EXPECT_LT(took, std::chrono::seconds(5));
  a->EndTurn(k, held);
}

// `kfuse cache explain`'s fleet line says hit only for an entry this node
// would use.
TEST_F(FleetPipelineTest, ProbeSaysRejectedForAnEntryThatDoesNotVerifyHere) {
  Node a("a", pg_->Dsn(), 1, trusted_);
  Node b("b", pg_->Dsn(), 2, trusted_);
  Node stranger("stranger", pg_->Dsn(), 3, TrustedKeys({KeyFrom(3).public_key}));
  const v1::CompileRequest by_b = ScaledActivation(v1::OP_SILU, 7.5, 1 << 20);
  const v1::CompileRequest by_stranger = ScaledActivation(v1::OP_SILU, 8.5, 1 << 20);
  const v1::CompileRequest by_none = ScaledActivation(v1::OP_SILU, 9.5, 1 << 20);
  ASSERT_TRUE(b.Compile(by_b).ok());
  ASSERT_TRUE(stranger.Compile(by_stranger).ok());
  auto probe = [&](const v1::CompileRequest& r) {
    absl::StatusOr<Prepared> p = a.pipeline->Prepare(r);
    return p.ok() ? a.fleet->Probe(p->key) : p.status().ToString();
  };
  EXPECT_EQ(probe(by_b), "hit");
  EXPECT_EQ(probe(by_stranger), "rejected");
  EXPECT_EQ(probe(by_none), "miss");
}

// A node outside the trust set (a staging node, a key taken out of service)
// that published a key first does not keep the trusted nodes from sharing
// theirs: each signer has its own entry under the key.
TEST_F(FleetPipelineTest, AnUntrustedSignersEntryDoesNotBlockTheKeyForTrustedNodes) {
  Node stranger("stranger", pg_->Dsn(), 3, TrustedKeys({KeyFrom(3).public_key}));
  Node a("a", pg_->Dsn(), 1, trusted_);
  Node b("b", pg_->Dsn(), 2, trusted_);
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 11.5, 1 << 20);
  ASSERT_TRUE(stranger.Compile(r).ok());
  absl::StatusOr<v1::CompileResponse> built = a.Compile(r);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_GT(a.gpu.runs.load(), 0);
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE key = '" + built->plan().key() + "'"), "2");

  absl::StatusOr<v1::CompileResponse> served = b.Compile(r);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->cache(), v1::CACHE_OUTCOME_FLEET_HIT);
  EXPECT_EQ(b.gpu.runs.load(), 0);
  // Neither trusted node counted the stranger's entry as a failure: it never
  // asked for it.
  for (Node* n : {&a, &b}) {
    const std::string text = n->metrics->Text();
    EXPECT_EQ(text.find("kfuse_verification_failures_total{what=\"fleet_signature\"}"), std::string::npos) << text;
  }
}

// A forged row read by one request after another (a lookup, then the wait
// for a lease) is counted and logged once, not on every read.
TEST_F(FleetPipelineTest, AForgedEntryReadAgainIsReportedOnceAMinute) {
  Node stranger("stranger", pg_->Dsn(), 3, TrustedKeys({KeyFrom(3).public_key}));
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 11.5, 1 << 20);
  ASSERT_TRUE(stranger.Compile(r).ok());
  absl::StatusOr<Prepared> p = stranger.pipeline->Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  ForgeUnder(p->key.ArtifactKey(), KeyFrom(1));
  SigningKey key = KeyFrom(1);
  std::unique_ptr<FleetTier> reader = Tier("reader", &key, 5);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(reader->Fetch(Store::Kind::kArtifact, p->key).has_value());
  const std::string text = metrics_->Text();
  EXPECT_NE(text.find("kfuse_verification_failures_total{what=\"fleet_signature\"} 1\n"), std::string::npos)
      << text;
}

// A signed entry whose blob's bytes are not the ones signed (the schema's
// check keeps them out of the database as it makes it, so the check is
// dropped here as an older or altered database lacks it) is refused and
// counted as a blob that does not match, not as a forged signature: the
// signer is not at fault.
TEST_F(FleetPipelineTest, AnEntryWhoseBlobWasRewrittenIsCountedAsABadBlob) {
  Node writer("writer", pg_->Dsn(), 1, TrustedKeys({KeyFrom(1).public_key}));
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 12.5, 1 << 20);
  ASSERT_TRUE(writer.Compile(r).ok());
  absl::StatusOr<Prepared> p = writer.pipeline->Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string blob = "sha256 IN (SELECT blob_sha256 FROM kfuse_entries WHERE kind = 'artifact' AND key = '" +
                           p->key.ArtifactKey() + "')";
  const std::string check = "kfuse_blobs_sha256_matches";
  ASSERT_EQ(pg_->Query("ALTER TABLE kfuse_blobs DROP CONSTRAINT " + check +
                       "; UPDATE kfuse_blobs SET data = data || decode('00', 'hex') WHERE " + blob),
            "");
  SigningKey key = KeyFrom(1);
  std::unique_ptr<FleetTier> reader = Tier("reader", &key, 5);
  EXPECT_FALSE(reader->Fetch(Store::Kind::kArtifact, p->key).has_value());
  const std::string text = metrics_->Text();
  EXPECT_NE(text.find("kfuse_verification_failures_total{what=\"fleet_blob\"} 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("what=\"fleet_signature\""), std::string::npos) << text;
  EXPECT_EQ(pg_->Query("UPDATE kfuse_blobs SET data = substring(data FROM 1 FOR length(data) - 1) WHERE " + blob +
                       "; ALTER TABLE kfuse_blobs ADD CONSTRAINT " + check +
                       " CHECK (sha256 = encode(sha256(data), 'hex'))"),
            "");
}

// An entry under a trusted signer's name whose signature does not verify (a
// writer without that key) is counted once while a node waits, not at
// every poll, and does not stop the wait: another trusted signer's entry
// that arrives meanwhile is taken.
TEST_F(FleetPipelineTest, AForgedEntryIsCountedOnceAndTheWaitGoesOn) {
  Node stranger("stranger", pg_->Dsn(), 3, TrustedKeys({KeyFrom(3).public_key}));
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 10.5, 1 << 20);
  ASSERT_TRUE(stranger.Compile(r).ok());
  absl::StatusOr<Prepared> p = stranger.pipeline->Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string k = p->key.ArtifactKey();
  // The stranger's entry again, claiming the trusted key 1 as its signer.
  ForgeUnder(k, KeyFrom(1));
  std::unique_ptr<FleetStore> other = BareStore("holder");
  ASSERT_TRUE(*other->TryLease(k, 30));
  // The stranger's entry, signed by the trusted key 2, published while the
  // waiter polls.
  auto stranger_rows = other->Get(Store::Kind::kArtifact, k, {std::string(32, '\0')});
  ASSERT_TRUE(stranger_rows.ok() && stranger_rows->empty());  // Nothing under a key nobody holds.
  stranger_rows = other->Get(Store::Kind::kArtifact, k, {SignerFrom(3)});
  ASSERT_TRUE(stranger_rows.ok() && stranger_rows->size() == 1u) << stranger_rows.status();
  v1::StoreEntry genuine = (*stranger_rows)[0];
  SignStoreEntry(KeyFrom(2), &genuine);
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ASSERT_TRUE(other->Publish(genuine).ok());
  });

  SigningKey key = KeyFrom(1);
  std::unique_ptr<FleetTier> waiter = Tier("waiter", &key, 5);
  FleetTier::Turn turn = waiter->AwaitTurn(p->key, nullptr, [](const v1::StoreEntry&) { return true; });
  publisher.join();
  EXPECT_FALSE(turn.leased);
  ASSERT_TRUE(turn.arrived.has_value());
  EXPECT_EQ(turn.arrived->signer(), genuine.signer());
  const std::string text = metrics_->Text();
  EXPECT_NE(text.find("kfuse_verification_failures_total{what=\"fleet_signature\"} 1\n"), std::string::npos)
      << text;
  EXPECT_EQ(waiter->Probe(p->key), "hit");
  ASSERT_TRUE(other->ReleaseLease(k).ok());
}

// A verified entry that does not serve the request (here: the first
// published) does not hide a later one by another trusted signer that does.
TEST_F(FleetPipelineTest, AnEntryThatDoesNotServeDoesNotHideOneThatDoes) {
  Node a("a", pg_->Dsn(), 1, trusted_);
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 12.5, 1 << 20);
  ASSERT_TRUE(a.Compile(r).ok());
  absl::StatusOr<Prepared> p = a.pipeline->Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string k = p->key.ArtifactKey();
  std::unique_ptr<FleetStore> bare = BareStore("reader");
  auto rows = bare->Get(Store::Kind::kArtifact, k, {SignerFrom(1)});
  ASSERT_TRUE(rows.ok() && rows->size() == 1u) << rows.status();
  v1::StoreEntry second = (*rows)[0];
  second.set_node("b");  // Another trusted signer's entry for the same key, published after a's.
  SignStoreEntry(KeyFrom(2), &second);
  ASSERT_TRUE(bare->Publish(second).ok());

  SigningKey key = KeyFrom(1);
  std::unique_ptr<FleetTier> reader = Tier("reader", &key, 5);
  std::optional<v1::StoreEntry> first = reader->Fetch(Store::Kind::kArtifact, p->key);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->node(), "a");  // First published first.
  std::optional<v1::StoreEntry> served =
      reader->Fetch(Store::Kind::kArtifact, p->key, [](const v1::StoreEntry& e) { return e.node() == "b"; });
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->node(), "b");
}

// Through the pipeline: a trusted signer's entry published first that does
// not serve (its plan is another key's) does not hide a later trusted
// signer's that does; the request is a fleet hit, not a build.
TEST_F(FleetPipelineTest, AFleetLookupPassesOverAnEntryThatDoesNotServe) {
  Node a("a", pg_->Dsn(), 1, trusted_);
  Node b("b", pg_->Dsn(), 2, trusted_);
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 13.5, 1 << 20);
  const v1::CompileRequest other = ScaledActivation(v1::OP_SILU, 14.5, 1 << 20);
  ASSERT_TRUE(a.Compile(r).ok());
  ASSERT_TRUE(a.Compile(other).ok());
  absl::StatusOr<Prepared> p = a.pipeline->Prepare(r);
  absl::StatusOr<Prepared> q = a.pipeline->Prepare(other);
  ASSERT_TRUE(p.ok() && q.ok());
  std::unique_ptr<FleetStore> bare = BareStore("crafter");
  const std::vector<std::string> by_a = {SignerFrom(1)};
  auto rows = bare->Get(Store::Kind::kArtifact, p->key.ArtifactKey(), by_a);
  auto others = bare->Get(Store::Kind::kArtifact, q->key.ArtifactKey(), by_a);
  ASSERT_TRUE(rows.ok() && rows->size() == 1u && others.ok() && others->size() == 1u);
  // Signed by the trusted key 2, so it verifies; its plan is `other`'s.
  v1::StoreEntry misfiled = (*rows)[0];
  misfiled.set_blob((*others)[0].blob());
  misfiled.set_blob_sha256((*others)[0].blob_sha256());
  misfiled.set_node("misfiled");
  SignStoreEntry(KeyFrom(2), &misfiled);
  ASSERT_TRUE(bare->Publish(misfiled).ok());
  ASSERT_EQ(pg_->Query("UPDATE kfuse_entries SET published_at = now() - interval '1 hour'"
                       " WHERE node = 'misfiled'"),
            "");

  Node c("c", pg_->Dsn(), 4, trusted_);
  absl::StatusOr<v1::CompileResponse> served = c.Compile(r);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->cache(), v1::CACHE_OUTCOME_FLEET_HIT);
  EXPECT_EQ(served->plan().key(), p->key.ArtifactKey());
  EXPECT_EQ(c.gpu.runs.load(), 0);
  const std::string text = c.metrics->Text();
  EXPECT_NE(text.find("kfuse_lookups_total{result=\"hit\",tier=\"fleet\"} 1\n"), std::string::npos) << text;
}

TEST_F(FleetPipelineTest, AHeuristicAnswerToARequestForTuningStaysLocal) {
  Node a("a", pg_->Dsn(), 1, trusted_, /*gpu_gone=*/true);
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 2.5, 1 << 20);
  absl::StatusOr<v1::CompileResponse> built = a.Compile(r);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE key = '" + built->plan().key() + "'"), "0");
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_leases"), "0");  // Given back.

  // A node whose GPU works tunes it and publishes the tuned plan.
  Node b("b", pg_->Dsn(), 2, trusted_);
  absl::StatusOr<v1::CompileResponse> tuned = b.Compile(r);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(tuned->plan().provenance().state(), v1::TUNE_STATE_TUNED);
  EXPECT_EQ(pg_->Query("SELECT state FROM kfuse_entries WHERE key = '" + tuned->plan().key() + "'"), "tuned");
}

// A heuristic answer of a node that tunes (asked for, or a cold start's) is
// not checked yet: it stays local and takes no lease, where the tuned one
// is published.
TEST_F(FleetPipelineTest, AHeuristicAnswerOfANodeThatTunesStaysLocal) {
  Node a("a", pg_->Dsn(), 1, trusted_);
  v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 3.5, 1 << 20);
  r.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  absl::StatusOr<v1::CompileResponse> built = a.Compile(r);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->plan().provenance().state(), v1::TUNE_STATE_HEURISTIC);
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries"), "0");
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_leases"), "0");
  r.mutable_policy()->set_mode(v1::TuningPolicy::MODE_QUICK);
  absl::StatusOr<v1::CompileResponse> tuned = a.Compile(r);
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_EQ(pg_->Query("SELECT state FROM kfuse_entries WHERE key = '" + tuned->plan().key() + "'"), "tuned");
}

// A heuristic answer an older node published is not taken by a node that
// tunes: unchecked, it may be one tuning found wrong, which a signer's entry
// in the fleet can never stop being.
TEST_F(FleetPipelineTest, ANodeThatTunesDoesNotTakeAHeuristicAnswerFromTheFleet) {
  Node a("a", pg_->Dsn(), 1, trusted_);
  v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 4.5, 1 << 20);
  r.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  ASSERT_TRUE(a.Compile(r).ok());
  absl::StatusOr<Prepared> p = a.pipeline->Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::optional<std::string>> blob = a.store->GetArtifact(p->heuristic_key);
  ASSERT_TRUE(blob.ok() && blob->has_value());
  EntryMeta meta;
  meta.family = "pointwise";
  meta.state = "heuristic";
  a.fleet->Publish(Store::Kind::kArtifact, p->heuristic_key, meta, **blob);  // As an older node did.
  ASSERT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries"), "1");

  Node b("b", pg_->Dsn(), 2, trusted_);
  absl::StatusOr<v1::CompileResponse> built = b.Compile(r);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->cache(), v1::CACHE_OUTCOME_MISS);  // Built here, not a FLEET_HIT.
}

// A forged row under a node's own signer keeps that node's entry out; the
// node's publish says so (once per publish), where a key it already holds
// under its signer, genuinely signed, says nothing.
TEST_F(FleetPipelineTest, APublishBlockedByAForgedRowUnderItsOwnSignerIsReported) {
  Node stranger("stranger", pg_->Dsn(), 3, TrustedKeys({KeyFrom(3).public_key}));
  const v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 13.5, 1 << 20);
  ASSERT_TRUE(stranger.Compile(r).ok());
  absl::StatusOr<Prepared> p = stranger.pipeline->Prepare(r);
  ASSERT_TRUE(p.ok()) << p.status();
  ForgeUnder(p->key.ArtifactKey(), KeyFrom(1));

  Node a("a", pg_->Dsn(), 1, trusted_);
  absl::StatusOr<v1::CompileResponse> built = a.Compile(r);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->cache(), v1::CACHE_OUTCOME_MISS);
  const std::string blocked = "kfuse_fleet_errors_total{op=\"publish_blocked\"} 1\n";
  EXPECT_NE(a.metrics->Text().find(blocked), std::string::npos) << a.metrics->Text();
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE key = '" + p->key.ArtifactKey() + "' AND node = 'a'"),
            "0");

  // Another node signing with the same key publishes a key that a already
  // published: the slot holds a's genuine entry, and nothing is reported.
  const v1::CompileRequest r2 = ScaledActivation(v1::OP_SILU, 14.5, 1 << 20);
  ASSERT_TRUE(a.Compile(r2).ok());
  absl::StatusOr<Prepared> p2 = a.pipeline->Prepare(r2);
  ASSERT_TRUE(p2.ok()) << p2.status();
  SigningKey key = KeyFrom(1);
  std::unique_ptr<FleetTier> twin = Tier("twin", &key, 5);
  twin->Publish(Store::Kind::kArtifact, p2->key, EntryMeta{"pointwise", "sm_90", "fake", "tuned", "twin"}, "twin");
  EXPECT_EQ(pg_->Query("SELECT node FROM kfuse_entries WHERE key = '" + p2->key.ArtifactKey() + "'"), "a");
  EXPECT_EQ(metrics_->Text().find("publish_blocked"), std::string::npos) << metrics_->Text();
}

TEST_F(FleetPipelineTest, AForcedRetuneIsNotAnsweredFromTheFleet) {
  Node a("a", pg_->Dsn(), 1, trusted_);
  Node b("b", pg_->Dsn(), 2, trusted_);
  v1::CompileRequest r = ScaledActivation(v1::OP_SILU, 3.5, 1 << 20);
  ASSERT_TRUE(a.Compile(r).ok());
  r.mutable_policy()->set_force(true);
  absl::StatusOr<v1::CompileResponse> forced = b.Compile(r);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_GT(b.gpu.runs.load(), 0);
  // Nor published: it stays local, beside a's entries.
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE key = '" + forced->plan().key() + "' AND node = 'b'"),
            "0");
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE key = '" + forced->plan().key() + "' AND node = 'a'"),
            "1");
}

}  // namespace
}  // namespace kfuse
