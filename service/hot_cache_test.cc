#include "service/hot_cache.h"

#include "gtest/gtest.h"

namespace kfuse {
namespace {

std::shared_ptr<const v1::CompileResponse> Response(const std::string& key, int cubin_bytes) {
  auto r = std::make_shared<v1::CompileResponse>();
  r->mutable_plan()->set_key(key);
  r->mutable_plan()->add_kernels()->set_cubin(std::string(cubin_bytes, 'x'));
  return r;
}

TEST(HotCacheTest, HitReturnsWhatWasPut) {
  HotCache hot(1 << 20);
  EXPECT_EQ(hot.Get("a"), nullptr);
  hot.Put("a", Response("a", 100));
  ASSERT_NE(hot.Get("a"), nullptr);
  EXPECT_EQ(hot.Get("a")->plan().key(), "a");
}

TEST(HotCacheTest, EvictsLeastRecentlyUsedPastTheCap) {
  HotCache hot(3000);
  hot.Put("a", Response("a", 900));
  hot.Put("b", Response("b", 900));
  hot.Put("c", Response("c", 900));
  ASSERT_NE(hot.Get("a"), nullptr);  // "b" is now the oldest.
  hot.Put("d", Response("d", 900));
  EXPECT_NE(hot.Get("a"), nullptr);
  EXPECT_EQ(hot.Get("b"), nullptr);
  EXPECT_NE(hot.Get("c"), nullptr);
  EXPECT_NE(hot.Get("d"), nullptr);
  EXPECT_LE(hot.bytes(), 3000);
}

TEST(HotCacheTest, ReplacingAKeyKeepsOneEntryAndClearEmpties) {
  HotCache hot(10000);
  hot.Put("a", Response("a", 500));
  hot.Put("a", Response("a", 700));
  EXPECT_LT(hot.bytes(), 1000);
  hot.Clear();
  EXPECT_EQ(hot.Get("a"), nullptr);
  EXPECT_EQ(hot.bytes(), 0);
}

TEST(HotCacheTest, APutFromBeforeAClearIsDropped) {
  HotCache hot(10000);
  uint64_t before = hot.generation();
  hot.Clear();  // A delete between the reader's store read and its put.
  hot.Put("a", Response("a", 100), before);
  EXPECT_EQ(hot.Get("a"), nullptr);
  hot.Put("a", Response("a", 100), hot.generation());
  EXPECT_NE(hot.Get("a"), nullptr);
}

TEST(HotCacheTest, EraseForgetsOneKeyAndDropsPutsFromBefore) {
  HotCache hot(10000);
  hot.Put("a", Response("a", 100));
  hot.Put("b", Response("b", 100));
  const int64_t both = hot.bytes();
  const uint64_t before = hot.generation();
  hot.Erase("a");
  EXPECT_EQ(hot.Get("a"), nullptr);
  EXPECT_NE(hot.Get("b"), nullptr);
  EXPECT_LT(hot.bytes(), both);
  hot.Put("a", Response("a", 100), before);  // Fetched before the erase.
  EXPECT_EQ(hot.Get("a"), nullptr);
  hot.Erase("never put");
  EXPECT_NE(hot.Get("b"), nullptr);
}

TEST(HotCacheTest, AnEntryLargerThanTheCapIsNotKept) {
  HotCache hot(100);
  hot.Put("a", Response("a", 1000));
  EXPECT_EQ(hot.Get("a"), nullptr);
}

TEST(HotCacheTest, KeysCountTowardTheCap) {
  HotCache hot(10000);
  hot.Put(std::string(6000, 'k'), Response("a", 10));  // Small answer, key held twice: over the cap.
  EXPECT_EQ(hot.Get(std::string(6000, 'k')), nullptr);
  EXPECT_EQ(hot.bytes(), 0);
  hot.Put(std::string(2000, 'k'), Response("a", 10));
  EXPECT_NE(hot.Get(std::string(2000, 'k')), nullptr);
  EXPECT_GE(hot.bytes(), 4000);
}

}  // namespace
}  // namespace kfuse
