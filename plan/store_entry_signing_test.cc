// Signed store entries (fleet store, bundles): what a node accepts from
// another, and the trusted-keys file.
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/key.h"
#include "plan/signing.h"

namespace kfuse {
namespace {

SigningKey KeyFrom(uint8_t b) {
  std::array<uint8_t, 32> seed{};
  seed.fill(b);
  return SigningKeyFromSeed(seed);
}

v1::StoreEntry Entry() {
  v1::StoreEntry e;
  e.set_kind("artifact");
  e.set_key(std::string(64, 'a'));
  e.set_chain("chain-hash");
  e.set_spec("sizes=1024");
  e.set_device("gpu:digest");
  e.set_toolchain("nvrtc-13.0/sm_90");
  e.set_generator("pointwise/1");
  e.set_family("pointwise");
  e.set_arch("sm_90");
  e.set_device_name("NVIDIA H200");
  e.set_state("tuned");
  e.set_description("mul relu -> f32[1024]");
  e.set_blob("the plan bytes");
  e.set_blob_sha256(Sha256Hex(e.blob()));
  e.set_node("node-a");
  e.set_created_unix_ms(1764470000123);
  e.set_kfuse_version("0.1.0");
  return e;
}

TEST(StoreEntrySignature, SignedEntryVerifiesAndEveryTamperIsRefused) {
  const SigningKey key = KeyFrom(1);
  const TrustedKeys trusted({key.public_key});
  v1::StoreEntry e = Entry();
  SignStoreEntry(key, &e);
  ASSERT_TRUE(VerifyStoreEntry(e, trusted).ok()) << VerifyStoreEntry(e, trusted);
  EXPECT_EQ(e.signer().size(), 32u);
  EXPECT_EQ(e.signature().size(), 64u);

  using Tamper = std::function<void(v1::StoreEntry&)>;
  const std::vector<std::pair<const char*, Tamper>> tampers = {
      {"kind", [](v1::StoreEntry& x) { x.set_kind("decision"); }},
      {"key", [](v1::StoreEntry& x) { x.set_key(std::string(64, 'b')); }},
      {"chain", [](v1::StoreEntry& x) { x.set_chain("other"); }},
      {"spec", [](v1::StoreEntry& x) { x.set_spec("sizes=2048"); }},
      {"device", [](v1::StoreEntry& x) { x.set_device("gpu:other"); }},
      {"toolchain", [](v1::StoreEntry& x) { x.set_toolchain("nvrtc-14.0/sm_90"); }},
      {"generator", [](v1::StoreEntry& x) { x.set_generator("pointwise/2"); }},
      {"state", [](v1::StoreEntry& x) { x.set_state("heuristic"); }},
      {"description", [](v1::StoreEntry& x) { x.set_description("x"); }},
      {"node", [](v1::StoreEntry& x) { x.set_node("node-b"); }},
      {"created", [](v1::StoreEntry& x) { x.set_created_unix_ms(1); }},
      {"version", [](v1::StoreEntry& x) { x.set_kfuse_version("9"); }},
      {"signature", [](v1::StoreEntry& x) { x.mutable_signature()->at(5) ^= 1; }},
  };
  for (const auto& [what, tamper] : tampers) {
    v1::StoreEntry bad = e;
    tamper(bad);
    EXPECT_EQ(VerifyStoreEntry(bad, trusted).code(), absl::StatusCode::kPermissionDenied) << what;
  }
  // The blob changed, the sha256 field not: the signer signed that hash,
  // so the bytes changed since: damage, DataLoss.
  v1::StoreEntry blob = e;
  blob.set_blob("other bytes");
  absl::Status damaged = VerifyStoreEntry(blob, trusted);
  EXPECT_EQ(damaged.code(), absl::StatusCode::kDataLoss) << damaged;
  EXPECT_TRUE(absl::StrContains(damaged.message(), "not the bytes signed")) << damaged;
  // Both changed to match each other: the signature refuses them.
  blob.set_blob_sha256(Sha256Hex(blob.blob()));
  EXPECT_EQ(VerifyStoreEntry(blob, trusted).code(), absl::StatusCode::kPermissionDenied);
  // A forgery under a trusted name whose hash does not match its bytes
  // either is a forgery, not damage: no signature covers it.
  v1::StoreEntry forged = e;
  forged.set_blob("other bytes");
  forged.mutable_signature()->at(5) ^= 1;
  EXPECT_EQ(VerifyStoreEntry(forged, trusted).code(), absl::StatusCode::kPermissionDenied);
  // Signed over a blob that does not match its sha256 field: DataLoss.
  v1::StoreEntry mismatch = Entry();
  mismatch.set_blob_sha256(Sha256Hex("something else"));
  SignStoreEntry(key, &mismatch);
  EXPECT_EQ(VerifyStoreEntry(mismatch, trusted).code(), absl::StatusCode::kDataLoss);
}

TEST(StoreEntrySignature, UntrustedOrUnsignedIsRefusedNamingTheEntry) {
  const SigningKey a = KeyFrom(1), b = KeyFrom(2);
  v1::StoreEntry e = Entry();
  SignStoreEntry(a, &e);
  absl::Status s = VerifyStoreEntry(e, TrustedKeys({b.public_key}));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("not a trusted key"), std::string::npos) << s;
  EXPECT_NE(s.message().find("artifact aaaa"), std::string::npos) << s;
  // A forger re-signing with its own key and claiming a trusted signer.
  v1::StoreEntry forged = e;
  SignStoreEntry(b, &forged);
  forged.set_signer(e.signer());
  EXPECT_EQ(VerifyStoreEntry(forged, TrustedKeys({a.public_key})).code(), absl::StatusCode::kPermissionDenied);
  v1::StoreEntry unsigned_entry = Entry();
  EXPECT_EQ(VerifyStoreEntry(unsigned_entry, TrustedKeys({a.public_key})).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(TrustedKeysFile, ParsesKeysCommentsAndBlankLinesAndNamesBadLines) {
  const SigningKey a = KeyFrom(1), b = KeyFrom(2), c = KeyFrom(3);
  absl::StatusOr<TrustedKeys> t =
      TrustedKeys::Parse(absl::StrCat("# fleet writers\n", a.public_key.Hex(), "\n\n  ", b.public_key.Hex(),
                                      "  # node b\n"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 2u);
  EXPECT_TRUE(t->Contains(a.public_key));
  EXPECT_TRUE(t->Contains(b.public_key));
  EXPECT_FALSE(t->Contains(c.public_key));
  absl::StatusOr<TrustedKeys> bad = TrustedKeys::Parse(absl::StrCat(a.public_key.Hex(), "\nnot-a-key\n"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_EQ(TrustedKeys::Load("/nonexistent/keys").status().code(), absl::StatusCode::kNotFound);
  // A directory reads as empty through an ifstream: no keys, silently.
  absl::StatusOr<TrustedKeys> dir = TrustedKeys::Load(::testing::TempDir());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dir.status().message()), ::testing::HasSubstr("is a directory"));
}

}  // namespace
}  // namespace kfuse
