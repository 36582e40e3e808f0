// Entries between nodes: the key must be the hash of the parts, and nothing
// that fails a check reaches the store.
#include "cache/store_entry.h"

#include "cache/store_test_util.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using store_testing::FreshDbPath;
using store_testing::TestBlob;
using store_testing::TestKey;
using store_testing::TestMeta;

TEST(StoreEntryTest, MadeEntriesCarryTheirKeyPartsAndLandInAStore) {
  const CacheKey k = TestKey("entry");
  v1::StoreEntry art = MakeStoreEntry(Store::Kind::kArtifact, k, TestMeta(), TestBlob("a", 500),
                                      EntryOrigin{"node-a", 123, "0.1.0"});
  v1::StoreEntry dec = MakeStoreEntry(Store::Kind::kDecision, k, TestMeta(), TestBlob("d", 300), {});
  EXPECT_EQ(art.key(), k.ArtifactKey());
  EXPECT_EQ(dec.key(), k.DecisionKey());
  EXPECT_TRUE(dec.toolchain().empty());
  EXPECT_EQ(art.node(), "node-a");
  EXPECT_TRUE(CheckEntryKey(art).ok());
  EXPECT_TRUE(CheckEntryKey(dec).ok());

  auto store = *Store::Open({.path = FreshDbPath("entry")});
  ASSERT_TRUE(PutStoreEntry(*store, art).ok());
  ASSERT_TRUE(PutStoreEntry(*store, dec).ok());
  EXPECT_EQ(**store->GetArtifact(k), art.blob());
  EXPECT_EQ(**store->GetDecision(k), dec.blob());
  auto listed = store->List(art.key(), 1);
  ASSERT_TRUE(listed.ok() && listed->size() == 1);
  EXPECT_EQ((*listed)[0].meta.description, TestMeta().description);
}

TEST(StoreEntryTest, AnEntryFiledUnderAnotherKeyOrWithABadBlobNeverLands) {
  auto store = *Store::Open({.path = FreshDbPath("bad-entry")});
  const CacheKey k = TestKey("victim");
  v1::StoreEntry moved = MakeStoreEntry(Store::Kind::kArtifact, TestKey("attacker"), TestMeta(),
                                        TestBlob("evil", 100), {});
  moved.set_key(k.ArtifactKey());  // Claims the victim's key.
  absl::Status s = PutStoreEntry(*store, moved);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not the hash of its parts"), std::string::npos) << s;

  v1::StoreEntry corrupt = MakeStoreEntry(Store::Kind::kArtifact, k, TestMeta(), TestBlob("x", 100), {});
  corrupt.mutable_blob()->at(3) ^= 1;
  EXPECT_EQ(PutStoreEntry(*store, corrupt).code(), absl::StatusCode::kDataLoss);

  v1::StoreEntry decision = MakeStoreEntry(Store::Kind::kDecision, k, TestMeta(), TestBlob("d", 100), {});
  decision.set_toolchain("nvrtc-13.0/sm_90a");
  EXPECT_EQ(PutStoreEntry(*store, decision).code(), absl::StatusCode::kInvalidArgument);

  v1::StoreEntry kind = MakeStoreEntry(Store::Kind::kArtifact, k, TestMeta(), TestBlob("k", 100), {});
  kind.set_kind("blob");
  EXPECT_EQ(PutStoreEntry(*store, kind).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_FALSE(store->GetArtifact(k)->has_value());
  EXPECT_EQ(*store->TotalBytes(), 0);
}

}  // namespace
}  // namespace kfuse
