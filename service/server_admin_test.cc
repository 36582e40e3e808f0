// Explain, ListKernels, ExportKernels and ImportKernels in process: two
// nodes with their own stores on loopback, a fake compiler, no GPU.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sqlite3.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/store_entry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kfuse/storage/v1/storage.pb.h"
#include "plan/signing.h"
#include "service/auth.h"
#include "service/server.h"
#include "service/service_test_util.h"

namespace kfuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using service_testing::FakeCompiler;
using service_testing::LoopbackServer;
using service_testing::ScaledActivation;
using service_testing::TestStorePath;

// relu(x * scale) over 4096 f32 elements.
v1::CompileRequest Relu(double scale) { return ScaledActivation(v1::OP_RELU, scale); }

SigningKey KeyFrom(uint8_t fill) {
  std::array<uint8_t, 32> seed;
  seed.fill(fill);
  return SigningKeyFromSeed(seed);
}

struct NodeConfig {
  std::string name;
  uint8_t key_seed = 1;
  bool signing = true;
  bool read_only = false;
  std::vector<PublicKey> trusted;
  const TokenSet* tokens = nullptr;
  int busy_timeout_ms = 5000;
  int max_queued_admin_calls = 64;
  int64_t store_max_bytes = int64_t{1} << 30;
};

// One kfused in process: store, pipeline, service, server, stub.
class Node {
 public:
  explicit Node(const NodeConfig& c) {
    store_path = TestStorePath("_" + c.name);
    store = *Store::Open({.path = store_path, .max_bytes = c.store_max_bytes, .busy_timeout_ms = c.busy_timeout_ms});
    PipelineDeps deps;
    deps.compiler = &compiler;
    deps.store = store.get();
    PipelineOptions po;
    po.node = c.name;
    po.read_only = c.read_only;
    pipeline = std::make_unique<Pipeline>(std::move(deps), po);
    key = KeyFrom(c.key_seed);
    trusted = TrustedKeys(c.trusted);
    metrics = *Metrics::Create("");
    ServiceOptions opts;
    opts.metrics = metrics.get();
    opts.signing_key = c.signing ? &key : nullptr;
    opts.trusted_keys = &trusted;
    opts.tokens = c.tokens;
    opts.max_queued_admin_calls = c.max_queued_admin_calls;
    service = std::make_unique<KernelServiceImpl>(pipeline.get(), opts);
    server = std::make_unique<LoopbackServer>(service.get());
    stub = server->stub();
  }
  ~Node() {
    server.reset();
    service->Drain();
  }

  std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return ctx;
  }
  v1::CompileResponse Compile(const v1::CompileRequest& req) {
    v1::CompileResponse resp;
    grpc::Status s = stub->Compile(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  grpc::Status Explain(const v1::CompileRequest& req, v1::ExplainResponse* resp) {
    return stub->Explain(Ctx().get(), req, resp);
  }
  grpc::Status Export(const v1::ExportKernelsRequest& req, std::vector<v1::StoreEntry>* out) {
    auto ctx = Ctx();
    auto reader = stub->ExportKernels(ctx.get(), req);
    v1::StoreEntry e;
    while (reader->Read(&e)) out->push_back(e);
    return reader->Finish();
  }
  grpc::Status Import(const std::vector<v1::StoreEntry>& entries, v1::ImportKernelsResponse* resp) {
    v1::ImportKernelsRequest req;
    for (const v1::StoreEntry& e : entries) *req.add_entries() = e;
    return stub->ImportKernels(Ctx().get(), req, resp);
  }
  // "kind/key" of every stored entry.
  std::set<std::string> Keys() {
    std::set<std::string> out;
    absl::StatusOr<std::vector<EntrySummary>> list = store->List("", 0);
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return out;
    for (const EntrySummary& e : *list) out.insert(e.kind + "/" + e.key);
    return out;
  }

  std::string store_path;
  FakeCompiler compiler;
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<Store> store;
  std::unique_ptr<Pipeline> pipeline;
  SigningKey key;
  TrustedKeys trusted;
  std::unique_ptr<KernelServiceImpl> service;
  std::unique_ptr<LoopbackServer> server;
  v1::KernelService::Stub* stub = nullptr;
};

v1::ExportKernelsRequest All() {
  v1::ExportKernelsRequest r;
  r.set_all(true);
  return r;
}

std::set<std::string> KeysOf(const std::vector<v1::StoreEntry>& entries) {
  std::set<std::string> out;
  for (const v1::StoreEntry& e : entries) out.insert(e.kind() + "/" + e.key());
  return out;
}

const v1::StoreEntry& FirstOfKind(const std::vector<v1::StoreEntry>& entries, const std::string& kind) {
  for (const v1::StoreEntry& e : entries) {
    if (e.kind() == kind) return e;
  }
  ADD_FAILURE() << "no " << kind << " among the entries";
  return entries.front();
}

TEST(ServerAdminTest, ExplainAStoredRequestAndOneForAnotherArch) {
  Node a({.name = "node-a"});
  v1::ExplainResponse cold;
  ASSERT_TRUE(a.Explain(Relu(2.0), &cold).ok());
  EXPECT_FALSE(cold.found());
  EXPECT_TRUE(cold.nearest_key().empty());
  ASSERT_EQ(cold.parts_size(), 5);
  EXPECT_TRUE(cold.parts(0).nearest_value().empty());
  EXPECT_THAT(cold.text(), HasSubstr("cold miss"));

  const v1::CompileResponse compiled = a.Compile(Relu(2.0));
  v1::ExplainResponse same;
  ASSERT_TRUE(a.Explain(Relu(2.0), &same).ok());
  EXPECT_TRUE(same.found());
  EXPECT_EQ(same.key(), compiled.plan().key());
  EXPECT_EQ(same.fleet(), "off");
  EXPECT_THAT(same.differing_parts(), IsEmpty());
  ASSERT_EQ(same.parts_size(), 5);
  for (const v1::KeyPart& p : same.parts()) {
    EXPECT_FALSE(p.value().empty()) << p.name();
    EXPECT_EQ(p.value(), p.nearest_value()) << p.name();
  }

  v1::CompileRequest sm80 = Relu(2.0);
  sm80.mutable_target()->set_compute_capability(80);
  v1::ExplainResponse other;
  ASSERT_TRUE(a.Explain(sm80, &other).ok());
  EXPECT_FALSE(other.found());
  EXPECT_NE(other.key(), compiled.plan().key());
  EXPECT_EQ(other.nearest_key(), compiled.plan().key());
  EXPECT_THAT(other.differing_parts(), UnorderedElementsAre("device", "toolchain"));
  std::vector<std::string> names;
  for (const v1::KeyPart& p : other.parts()) {
    names.push_back(p.name());
    if (p.name() == "toolchain") {
      EXPECT_EQ(p.value(), "fake-1/sm_80");
      EXPECT_EQ(p.nearest_value(), "fake-1/sm_90");
    } else if (p.name() == "chain") {
      EXPECT_EQ(p.value(), p.nearest_value());
    }
  }
  EXPECT_THAT(names, ElementsAre("chain", "spec", "device", "toolchain", "generator"));
  EXPECT_THAT(other.text(), HasSubstr("toolchain"));
  // This node has no GPU: a miss is a heuristic compile, not tuning.
  EXPECT_THAT(other.text(), HasSubstr("no tuning decision for this key either: this server does not tune"));
  EXPECT_THAT(other.text(), Not(HasSubstr("a miss means tuning")));
  // Explaining never compiles.
  EXPECT_EQ(a.compiler.calls.load(), 1);
}

// x [16, 64] @ w [64, 32], bf16: one matmul kernel.
v1::CompileRequest Product() {
  v1::CompileRequest r;
  for (auto [name, rows, cols] : {std::tuple{"x", 16, 64}, std::tuple{"w", 64, 32}}) {
    v1::TensorSpec* in = r.mutable_chain()->add_inputs();
    in->set_name(name);
    in->set_dtype(v1::DTYPE_BF16);
    in->add_shape()->set_size(rows);
    in->add_shape()->set_size(cols);
  }
  v1::Op* mm = r.mutable_chain()->add_ops();
  mm->set_kind(v1::OP_MATMUL);
  mm->add_args()->set_input(0);
  mm->add_args()->set_input(1);
  v1::Output* out = r.mutable_chain()->add_outputs();
  out->set_name("y");
  out->mutable_value()->set_op(0);
  return r;
}

TEST(ServerAdminTest, ListKernelsNamesEachPlansFamily) {
  Node a({.name = "node-a"});
  const std::string relu = a.Compile(Relu(2.0)).plan().key();
  const std::string product = a.Compile(Product()).plan().key();
  v1::ListKernelsResponse list;
  ASSERT_TRUE(a.stub->ListKernels(a.Ctx().get(), {}, &list).ok());
  std::map<std::string, v1::Family> families;
  for (const v1::KernelSummary& k : list.kernels()) families[k.key()] = k.family();
  EXPECT_EQ(families[relu], v1::FAMILY_POINTWISE);
  EXPECT_EQ(families[product], v1::FAMILY_MATMUL);
  EXPECT_EQ(families.size(), 2u);
}

TEST(ServerAdminTest, ExplainOfABadRequestIsItsError) {
  Node a({.name = "node-a"});
  v1::CompileRequest bad = Relu(2.0);
  bad.mutable_chain()->mutable_ops(1)->mutable_args(1)->set_op(7);
  v1::ExplainResponse resp;
  grpc::Status s = a.Explain(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("ops[1]"));
}

TEST(ServerAdminTest, ExportThenImportRoundTripsAndTheSecondNodeServesAHit) {
  Node a({.name = "node-a", .key_seed = 1});
  Node b({.name = "node-b", .key_seed = 2, .trusted = {KeyFrom(1).public_key}});
  a.Compile(Relu(2.0));
  a.Compile(Relu(3.0));
  std::vector<v1::StoreEntry> entries;
  ASSERT_TRUE(a.Export(All(), &entries).ok());
  ASSERT_EQ(entries.size(), 4u);  // Two decisions, two artifacts.
  EXPECT_EQ(KeysOf(entries), a.Keys());
  TrustedKeys only_a({a.key.public_key});
  for (const v1::StoreEntry& e : entries) {
    EXPECT_TRUE(VerifyStoreEntry(e, only_a).ok()) << e.kind() << " " << e.key();
    EXPECT_TRUE(CheckEntryKey(e).ok());
    EXPECT_EQ(e.node(), "node-a");
    EXPECT_EQ(e.kfuse_version(), kKfuseVersion);
    EXPECT_GT(e.created_unix_ms(), 0);
  }

  // B answered Relu(2) itself before (a memoised hit), so the import
  // replaces its own entry and the next answer must be A's.
  EXPECT_EQ(b.Compile(Relu(2.0)).plan().provenance().node(), "node-b");
  EXPECT_EQ(b.Compile(Relu(2.0)).cache(), v1::CACHE_OUTCOME_HIT);
  v1::ImportKernelsResponse imported;
  ASSERT_TRUE(b.Import(entries, &imported).ok());
  EXPECT_THAT(imported.rejected(), IsEmpty());
  // B's own decision for Relu(2) may equal A's (already present); every
  // other entry is new or replaces B's.
  EXPECT_GE(imported.imported(), 3u);
  EXPECT_EQ(imported.imported() + imported.already_present(), 4u);
  EXPECT_EQ(b.Keys(), a.Keys());

  const int calls = b.compiler.calls.load();
  v1::CompileResponse two = b.Compile(Relu(2.0)), three = b.Compile(Relu(3.0));
  EXPECT_EQ(two.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(three.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(two.plan().provenance().node(), "node-a");
  EXPECT_EQ(three.plan().provenance().node(), "node-a");
  EXPECT_EQ(b.compiler.calls.load(), calls);

  v1::ImportKernelsResponse again;
  ASSERT_TRUE(b.Import(entries, &again).ok());
  EXPECT_EQ(again.imported(), 0u);
  EXPECT_EQ(again.already_present(), 4u);
}

// An import into a store smaller than the bundle: the first entries are
// evicted to make room for the later ones, and the answer says how many.
TEST(ServerAdminTest, AnImportSaysHowManyOfItsEntriesTheStoresCapEvicted) {
  Node a({.name = "evict-a", .key_seed = 1});
  for (int i = 0; i < 6; ++i) a.Compile(Relu(2.0 + i));
  std::vector<v1::StoreEntry> entries;
  ASSERT_TRUE(a.Export(All(), &entries).ok());
  ASSERT_EQ(entries.size(), 12u);
  int64_t largest = 0;
  for (const v1::StoreEntry& e : entries) largest = std::max<int64_t>(largest, e.blob().size());
  Node b({.name = "evict-b", .key_seed = 2, .trusted = {KeyFrom(1).public_key}, .store_max_bytes = 3 * largest});
  v1::ImportKernelsResponse imported;
  ASSERT_TRUE(b.Import(entries, &imported).ok());
  EXPECT_EQ(imported.imported(), 12u);
  EXPECT_GT(imported.evicted(), 0u);
  EXPECT_EQ(imported.imported() - imported.evicted(), b.Keys().size());
}

TEST(ServerAdminTest, ExportByKeyPrefixOrKeyBringsTheDecisionAlong) {
  Node a({.name = "node-a"});
  const std::string k2 = a.Compile(Relu(2.0)).plan().key();
  const std::string k3 = a.Compile(Relu(3.0)).plan().key();
  std::vector<v1::StoreEntry> by_key;
  v1::ExportKernelsRequest req;
  req.add_keys(k3.substr(0, 12));
  ASSERT_TRUE(a.Export(req, &by_key).ok());
  ASSERT_EQ(by_key.size(), 2u);
  EXPECT_EQ(by_key[0].kind(), "decision");  // Before its artifact.
  EXPECT_EQ(by_key[1].kind(), "artifact");
  EXPECT_EQ(by_key[1].key(), k3);
  EXPECT_EQ(EntryKey(by_key[0]).DecisionKey(), by_key[0].key());
  EXPECT_EQ(by_key[0].chain(), by_key[1].chain());
  EXPECT_EQ(by_key[0].spec(), by_key[1].spec());
  EXPECT_EQ(by_key[0].device(), by_key[1].device());

  std::vector<v1::StoreEntry> by_prefix;
  v1::ExportKernelsRequest prefix;
  prefix.set_key_prefix(k2);
  ASSERT_TRUE(a.Export(prefix, &by_prefix).ok());
  ASSERT_EQ(by_prefix.size(), 2u);
  EXPECT_EQ(by_prefix[1].key(), k2);
}

TEST(ServerAdminTest, ExportSelectionErrorsNameTheKey) {
  Node a({.name = "node-a"});
  // Artifacts until two keys share their first hex digit (17 suffice).
  std::map<char, std::string> first;
  char shared = 0;
  for (int i = 0; shared == 0; ++i) {
    CacheKey k{absl::StrCat("chain-", i), "spec", "device", "tc", "gen"};
    ASSERT_TRUE(a.store->PutArtifact(k, absl::StrCat("blob ", i), EntryMeta{}).ok());
    if (!first.emplace(k.ArtifactKey()[0], k.ArtifactKey()).second) shared = k.ArtifactKey()[0];
  }
  std::vector<v1::StoreEntry> out;
  v1::ExportKernelsRequest ambiguous;
  ambiguous.add_keys(std::string(1, shared));
  grpc::Status s = a.Export(ambiguous, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              HasSubstr(absl::StrCat("keys[0]: key prefix ", std::string(1, shared), " is ambiguous")));

  v1::ExportKernelsRequest unknown;
  unknown.add_keys(first.begin()->second);
  unknown.add_keys("zzzz");
  s = a.Export(unknown, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("keys[1]: no stored artifact has a key starting with zzzz"));

  v1::ExportKernelsRequest no_match;
  no_match.set_key_prefix("zzzz");
  s = a.Export(no_match, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("key_prefix: no stored artifact has a key starting with zzzz"));

  v1::ExportKernelsRequest two = All();
  two.set_key_prefix("a");
  EXPECT_EQ(a.Export(two, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(a.Export(v1::ExportKernelsRequest(), &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(out, IsEmpty());
  // Each key is a store query: as many as a delete may name, no more.
  v1::ExportKernelsRequest many;
  for (int i = 0; i <= kMaxAdminItems; ++i) many.add_keys(first.begin()->second);
  s = a.Export(many, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("keys: 10001 keys, at most 10000 a call"));

  // Everything, streamed: one message per entry.
  ASSERT_TRUE(a.Export(All(), &out).ok());
  EXPECT_EQ(out.size(), first.size() + 1);
}

TEST(ServerAdminTest, ExportWithoutASigningKeyIsRefused) {
  Node a({.name = "node-a", .signing = false});
  a.Compile(Relu(2.0));
  std::vector<v1::StoreEntry> out;
  grpc::Status s = a.Export(All(), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(out, IsEmpty());
}

TEST(ServerAdminTest, AnUntrustedSignerIsRejectedAndNamed) {
  Node a({.name = "node-a", .key_seed = 1});
  Node b({.name = "node-b", .key_seed = 2});  // Trusts only itself.
  a.Compile(Relu(2.0));
  std::vector<v1::StoreEntry> entries;
  ASSERT_TRUE(a.Export(All(), &entries).ok());
  v1::ImportKernelsResponse resp;
  ASSERT_TRUE(b.Import(entries, &resp).ok());
  EXPECT_EQ(resp.imported(), 0u);
  ASSERT_EQ(resp.rejected_size(), 2);
  const v1::StoreEntry& artifact = FirstOfKind(entries, "artifact");
  bool named = false;
  for (const std::string& r : resp.rejected()) {
    EXPECT_THAT(r, HasSubstr("which is not a trusted key"));
    named |= absl::StartsWith(r, absl::StrCat("artifact ", artifact.key().substr(0, 16), ": signed by "));
  }
  EXPECT_TRUE(named) << resp.rejected(0) << "\n" << resp.rejected(1);
  EXPECT_THAT(b.Keys(), IsEmpty());
  EXPECT_THAT(b.metrics->Text(), HasSubstr("kfuse_verification_failures_total{what=\"import\"} 2"));

  // B's own export comes back in.
  b.Compile(Relu(3.0));
  std::vector<v1::StoreEntry> own;
  ASSERT_TRUE(b.Export(All(), &own).ok());
  ASSERT_TRUE(b.store->DeleteAll().ok());
  ASSERT_TRUE(b.Import(own, &resp).ok());
  EXPECT_EQ(resp.imported(), 2u);
}

TEST(ServerAdminTest, TamperedOrMiskeyedEntriesAreRejectedAndTheStoreIsUnchanged) {
  Node a({.name = "node-a", .key_seed = 1});
  Node b({.name = "node-b", .key_seed = 2, .trusted = {KeyFrom(1).public_key}});
  a.Compile(Relu(2.0));
  a.Compile(Relu(3.0));
  std::vector<v1::StoreEntry> entries;
  ASSERT_TRUE(a.Export(All(), &entries).ok());
  const v1::StoreEntry& artifact = FirstOfKind(entries, "artifact");

  // The blob changed after signing (its sha256 updated to match).
  v1::StoreEntry tampered = artifact;
  tampered.mutable_blob()->append("x");
  tampered.set_blob_sha256(Sha256Hex(tampered.blob()));
  // The blob changed, the sha256 not.
  v1::StoreEntry bad_blob = artifact;
  bad_blob.mutable_blob()->back() ^= 1;
  // Signed by a trusted key, but filed under another entry's key.
  v1::StoreEntry miskeyed = artifact;
  for (const v1::StoreEntry& e : entries) {
    if (e.kind() == "artifact" && e.key() != artifact.key()) miskeyed.set_key(e.key());
  }
  SignStoreEntry(a.key, &miskeyed);
  // Parts and key agree, but the plan inside belongs to another key.
  v1::StoreEntry moved =
      MakeStoreEntry(Store::Kind::kArtifact, CacheKey{"c", "s", "d", "t", "g"}, EntryMetaOf(artifact),
                     artifact.blob(), EntryOrigin{"node-a", 1, "0"});
  SignStoreEntry(a.key, &moved);
  // Not signed at all.
  v1::StoreEntry unsigned_entry = artifact;
  unsigned_entry.clear_signer();
  unsigned_entry.clear_signature();

  // A signer that is no key's length.
  v1::StoreEntry short_signer = artifact;
  short_signer.set_signer("12345");
  // A kind and key that would forge lines where the rejections are printed.
  v1::StoreEntry forged = artifact;
  forged.set_kind("artifact\n\"evil");
  forged.set_key(std::string("k\0\nrejected: all\n", 18));

  v1::ImportKernelsResponse resp;
  ASSERT_TRUE(
      b.Import({tampered, bad_blob, miskeyed, moved, unsigned_entry, short_signer, forged}, &resp).ok());
  EXPECT_EQ(resp.imported(), 0u);
  ASSERT_EQ(resp.rejected_size(), 7);
  const std::string name = absl::StrCat("artifact ", artifact.key().substr(0, 16), ": ");
  EXPECT_EQ(resp.rejected(0), name + "signature does not verify");
  EXPECT_EQ(resp.rejected(1), name + "blob is not the bytes signed (changed since)");  // Damage.
  EXPECT_THAT(resp.rejected(2), HasSubstr(absl::StrCat("artifact ", miskeyed.key().substr(0, 16),
                                                       ": key is not the hash of its parts")));
  EXPECT_THAT(resp.rejected(3), HasSubstr("the plan inside is keyed"));
  EXPECT_EQ(resp.rejected(4), name + "unsigned entry");
  EXPECT_EQ(resp.rejected(5), name + "signer is 5 bytes; a public key is 32");
  EXPECT_THAT(resp.rejected(6), StartsWith("\"artifact\\x0a\\\"evil\" \"k\\x00\\x0arejected: all\": "));
  EXPECT_THAT(resp.rejected(6), Not(HasSubstr("\n")));
  EXPECT_THAT(b.Keys(), IsEmpty());

  // Good entries in the same request still go in; the bad ones do not.
  std::vector<v1::StoreEntry> mixed = {tampered, FirstOfKind(entries, "decision")};
  ASSERT_TRUE(b.Import(mixed, &resp).ok());
  EXPECT_EQ(resp.imported(), 1u);
  EXPECT_EQ(resp.rejected_size(), 1);
  EXPECT_EQ(b.Keys(), std::set<std::string>{"decision/" + mixed[1].key()});
}

// A trusted signer's plan with its kernels removed (key, hash and signature
// all in order) goes in, but is never served: a hit would launch nothing and
// leave the outputs unwritten. The request is compiled again instead.
TEST(ServerAdminTest, AStoredPlanWithoutItsKernelsIsAMiss) {
  // A plan of one kernel emptied; a plan of three (a column softmax) short
  // of its last kernel, and short of one intermediate.
  const std::vector<std::pair<v1::CompileRequest, std::function<void(v1::KernelPlan*)>>> cuts = {
      {Relu(2.0), [](v1::KernelPlan* p) { p->clear_kernels(); }},
      {service_testing::ColumnSoftmax(), [](v1::KernelPlan* p) { p->mutable_kernels()->RemoveLast(); }},
      {service_testing::ColumnSoftmax(), [](v1::KernelPlan* p) { p->mutable_intermediates()->RemoveLast(); }},
  };
  for (size_t i = 0; i < cuts.size(); ++i) {
    SCOPED_TRACE(i);
    const auto& [request, cut] = cuts[i];
    Node a({.name = "node-a", .key_seed = 1});
    Node b({.name = "node-b", .key_seed = 2, .trusted = {KeyFrom(1).public_key}});
    const v1::CompileResponse built = a.Compile(request);
    ASSERT_GT(built.plan().kernels_size(), 0);
    std::vector<v1::StoreEntry> entries;
    ASSERT_TRUE(a.Export(All(), &entries).ok());
    v1::StoreEntry emptied = FirstOfKind(entries, "artifact");
    storage::v1::Artifact artifact;
    ASSERT_TRUE(artifact.ParseFromString(emptied.blob()));
    cut(artifact.mutable_plan());
    emptied.set_blob(artifact.SerializeAsString());
    emptied.set_blob_sha256(Sha256Hex(emptied.blob()));
    SignStoreEntry(a.key, &emptied);
    v1::ImportKernelsResponse resp;
    ASSERT_TRUE(b.Import({emptied}, &resp).ok());
    ASSERT_EQ(resp.imported(), 1u) << (resp.rejected_size() > 0 ? resp.rejected(0) : "");

    const v1::CompileResponse served = b.Compile(request);
    EXPECT_EQ(served.cache(), v1::CACHE_OUTCOME_MISS);
    EXPECT_EQ(served.plan().kernels_size(), built.plan().kernels_size());
    EXPECT_EQ(served.plan().intermediates_size(), built.plan().intermediates_size());
    // The plan built again replaced the cut one: a hit now.
    EXPECT_EQ(b.Compile(request).cache(), v1::CACHE_OUTCOME_HIT);
  }
}

// A row naming another entry's blob (its sha256 intact: the file edited by
// hand) serves that entry's plan under this key unless the plan's own key
// is checked: a miss, then built and stored again.
TEST(ServerAdminTest, AStoredRowNamingAnotherEntrysBlobIsAMiss) {
  Node a({.name = "misfiled"});
  const v1::CompileResponse two = a.Compile(Relu(2.0));
  const v1::CompileResponse three = a.Compile(Relu(3.0));
  ASSERT_NE(two.plan().key(), three.plan().key());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(a.store_path.c_str(), &db), SQLITE_OK);
  const std::string sql =
      absl::StrCat("UPDATE artifacts SET blob_sha256 = (SELECT blob_sha256 FROM artifacts WHERE key = '",
                   three.plan().key(), "') WHERE key = '", two.plan().key(), "';");
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  ASSERT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  v1::CompileRequest again = Relu(2.0);
  again.set_include_source(true);  // Read from the store, not from memory.
  const v1::CompileResponse served = a.Compile(again);
  EXPECT_EQ(served.cache(), v1::CACHE_OUTCOME_MISS);
  EXPECT_EQ(served.plan().key(), two.plan().key());
  const v1::CompileResponse rebuilt = a.Compile(again);
  EXPECT_EQ(rebuilt.cache(), v1::CACHE_OUTCOME_HIT);
  EXPECT_EQ(rebuilt.plan().key(), two.plan().key());
}

TEST(ServerAdminTest, ImportIsRefusedByAReadOnlyServerAndCapped) {
  Node a({.name = "node-a", .key_seed = 1});
  Node ro({.name = "node-ro", .key_seed = 1, .read_only = true});
  a.Compile(Relu(2.0));
  std::vector<v1::StoreEntry> entries;
  ASSERT_TRUE(a.Export(All(), &entries).ok());
  v1::ImportKernelsResponse resp;
  grpc::Status s = ro.Import(entries, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(ro.Keys(), IsEmpty());
  // Explain there says what a miss costs on a read-only server.
  v1::ExplainResponse ex;
  ASSERT_TRUE(ro.Explain(Relu(2.0), &ex).ok());
  EXPECT_THAT(ex.text(), HasSubstr("read-only: a miss is refused"));

  v1::StoreEntry tiny;
  tiny.set_kind("artifact");
  std::vector<v1::StoreEntry> many(10001, tiny);
  s = a.Import(many, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("entries: at most 10000"));
}

// A store that cannot take entries (another process holds its write lock)
// stops the import with the store's error, not a rejection of each entry as
// if it were bad; importing again stores them.
TEST(ServerAdminTest, AnImportTheStoreCannotTakeFailsWithTheStoresError) {
  Node a({.name = "node-a", .key_seed = 1});
  Node b({.name = "node-b", .key_seed = 1, .busy_timeout_ms = 50});
  a.Compile(Relu(2.0));
  std::vector<v1::StoreEntry> entries;
  ASSERT_TRUE(a.Export(All(), &entries).ok());
  ASSERT_EQ(entries.size(), 2u);
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(b.store_path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  v1::ImportKernelsResponse resp;
  grpc::Status s = b.Import(entries, &resp);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("import stopped after storing 0 of 2 entries"));
  EXPECT_THAT(b.Keys(), IsEmpty());
  v1::ImportKernelsResponse again;
  ASSERT_TRUE(b.Import(entries, &again).ok());
  EXPECT_EQ(again.imported(), 2u);
  EXPECT_THAT(again.rejected(), IsEmpty());
}

// The export's listing runs on an admin thread; a caller gone before it
// ends leaves the stream to finish there, and the server goes on.
TEST(ServerAdminTest, ExportsWhoseCallerLeavesAtOnceEndCleanly) {
  Node a({.name = "node-a", .key_seed = 1});
  a.Compile(Relu(2.0));
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(100 * i));
    auto reader = a.stub->ExportKernels(&ctx, All());
    v1::StoreEntry e;
    while (reader->Read(&e)) {
    }
    (void)reader->Finish();
  }
  std::vector<v1::StoreEntry> entries;
  ASSERT_TRUE(a.Export(All(), &entries).ok());
  EXPECT_EQ(entries.size(), 2u);
}

TEST(ServerAdminTest, EveryAdminRpcNeedsTheToken) {
  const TokenSet tokens = *TokenSet::FromText("admin-token-0123456789");
  Node a({.name = "node-a", .tokens = &tokens});
  v1::ExplainResponse explained;
  EXPECT_EQ(a.Explain(Relu(2.0), &explained).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  std::vector<v1::StoreEntry> out;
  EXPECT_EQ(a.Export(All(), &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::ImportKernelsResponse imported;
  EXPECT_EQ(a.Import({}, &imported).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// A delete names keys or all, never both: keys beside all once emptied the
// store whatever the keys said.
TEST(ServerAdminTest, ADeleteOfKeysAndAllOrOfNothingIsRefusedAndDeletesNothing) {
  Node a({.name = "admin_delete_args"});
  const v1::CompileResponse first = a.Compile(Relu(2.0));
  auto del = [&](std::vector<std::string> keys, bool all) {
    v1::DeleteKernelsRequest req;
    for (std::string& k : keys) req.add_keys(std::move(k));
    req.set_all(all);
    v1::DeleteKernelsResponse resp;
    return a.stub->DeleteKernels(a.Ctx().get(), req, &resp);
  };
  for (const auto& [keys, all, message] :
       std::vector<std::tuple<std::vector<std::string>, bool, std::string>>{
           {{std::string(64, '0')}, true, "delete: give keys or all (not both, not neither)"},
           {{}, false, "delete: give keys or all (not both, not neither)"},
           {{first.plan().key(), ""}, false, "keys[1]: empty key"},
           {std::vector<std::string>(10001, "k"), false, "keys: 10001 keys, at most 10000 a call"}}) {
    SCOPED_TRACE(message);
    const grpc::Status s = del(keys, all);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message(), message);
  }
  v1::CompileResponse hit;
  ASSERT_TRUE(a.stub->Lookup(a.Ctx().get(), Relu(2.0), &hit).ok());  // Still stored.
  EXPECT_TRUE(del({first.plan().key()}, false).ok());
  EXPECT_EQ(a.stub->Lookup(a.Ctx().get(), Relu(2.0), &hit).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Deletes wait on the store's write lock, which another process may hold for
// seconds; they wait on admin threads, so hits are still answered meanwhile.
TEST(ServerAdminTest, DeletesWaitingOnAnotherProcesssLockDoNotHoldUpHits) {
  Node a({.name = "admin_locked"});
  const v1::CompileResponse first = a.Compile(Relu(2.0));
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(a.store_path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  constexpr int kDeletes = 16;
  std::vector<std::thread> deletes;
  std::atomic<int> deleted_ok{0};
  for (int i = 0; i < kDeletes; ++i) {
    deletes.emplace_back([&] {
      v1::DeleteKernelsRequest req;
      req.add_keys(first.plan().key());  // The first to get the lock deletes it.
      v1::DeleteKernelsResponse resp;
      if (a.stub->DeleteKernels(a.Ctx().get(), req, &resp).ok()) ++deleted_ok;
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> hits;
  std::atomic<int> hits_ok{0};
  for (int i = 0; i < 4; ++i) {
    hits.emplace_back([&] {
      v1::CompileResponse resp;
      if (a.stub->Compile(a.Ctx().get(), Relu(2.0), &resp).ok() && resp.plan().key() == first.plan().key()) {
        ++hits_ok;
      }
    });
  }
  for (std::thread& t : hits) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  for (std::thread& t : deletes) t.join();
  EXPECT_EQ(hits_ok.load(), 4);
  EXPECT_LT(seconds, 2.0);  // Deletes on the callback threads starved the hits for their 20 s deadline.
  EXPECT_EQ(deleted_ok.load(), kDeletes);  // Once the lock is let go.
}

// Admin calls wait for two threads; past the bound, a call is refused at
// once rather than queued (an import holds its entries while it waits).
TEST(ServerAdminTest, AdminCallsPastTheQueueBoundAreRefused) {
  Node a({.name = "admin_bound", .max_queued_admin_calls = 2});
  const v1::CompileResponse first = a.Compile(Relu(2.0));
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(a.store_path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  // Two deletes hold the admin threads on the lock; two more wait for them.
  // (However their arrivals interleave with the threads taking them, no
  // more than one of the four waits beyond an idle thread when it comes.)
  std::vector<std::thread> deletes;
  std::atomic<int> deleted_ok{0};
  // The lock let go and the deletes joined however the test ends (an
  // ASSERT below must not leave joinable threads behind).
  absl::Cleanup release = [&] {
    sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    for (std::thread& t : deletes) t.join();
  };
  for (int i = 0; i < 4; ++i) {
    deletes.emplace_back([&] {
      v1::DeleteKernelsRequest req;
      req.add_keys(first.plan().key());
      v1::DeleteKernelsResponse resp;
      if (a.stub->DeleteKernels(a.Ctx().get(), req, &resp).ok()) ++deleted_ok;
    });
  }
  // Up to 20 s: four calls reach a sanitized build slowly on a busy machine.
  for (int i = 0; i < 2000 && a.service->queued_admin_calls() < 2; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(a.service->queued_admin_calls(), 2);
  v1::ExplainResponse explained;
  grpc::Status refused = a.stub->Explain(a.Ctx().get(), Relu(2.0), &explained);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("store administration calls wait already"));
  v1::ImportKernelsRequest import;
  v1::ImportKernelsResponse imported;
  EXPECT_EQ(a.stub->ImportKernels(a.Ctx().get(), import, &imported).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  std::move(release).Invoke();
  EXPECT_EQ(deleted_ok.load(), 4);
  EXPECT_TRUE(a.stub->Explain(a.Ctx().get(), Relu(2.0), &explained).ok());
}

// As --max_queued_jobs=0: no call waits, but an idle thread takes one.
TEST(ServerAdminTest, WithNoAdminQueueAnIdleThreadStillTakesACall) {
  Node a({.name = "admin_noqueue", .max_queued_admin_calls = 0});
  a.Compile(Relu(2.0));
  v1::ExplainResponse explained;
  EXPECT_TRUE(a.stub->Explain(a.Ctx().get(), Relu(2.0), &explained).ok());
}

// A delete whose caller left while it waited for an admin thread deletes
// nothing (at shutdown, queued deletes do not wait on the lock either).
TEST(ServerAdminTest, AQueuedDeleteWhoseCallerLeftDeletesNothing) {
  Node a({.name = "admin_left"});
  const v1::CompileResponse first = a.Compile(Relu(2.0));
  const v1::CompileResponse second = a.Compile(Relu(3.0));
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(a.store_path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::vector<std::thread> deletes;
  for (int i = 0; i < 2; ++i) {
    deletes.emplace_back([&] {
      v1::DeleteKernelsRequest req;
      req.add_keys(first.plan().key());
      v1::DeleteKernelsResponse resp;
      a.stub->DeleteKernels(a.Ctx().get(), req, &resp);
    });
  }
  for (int i = 0; i < 200 && a.service->queued_admin_calls() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  absl::SleepFor(absl::Milliseconds(200));  // Both on the admin threads.
  v1::DeleteKernelsRequest req;
  req.add_keys(second.plan().key());
  v1::DeleteKernelsResponse resp;
  grpc::ClientContext leaving;
  leaving.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  EXPECT_EQ(a.stub->DeleteKernels(&leaving, req, &resp).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  for (std::thread& t : deletes) t.join();
  for (int i = 0; i < 200 && a.service->queued_admin_calls() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  absl::SleepFor(absl::Milliseconds(100));  // The left call's task has run.
  grpc::ClientContext ctx;
  v1::CompileResponse found;
  EXPECT_TRUE(a.stub->Lookup(&ctx, Relu(3.0), &found).ok());
}

}  // namespace
}  // namespace kfuse
