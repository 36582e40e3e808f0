// Helpers shared by the cache tests: fresh database paths and keys.
#ifndef KFUSE_CACHE_STORE_TEST_UTIL_H_
#define KFUSE_CACHE_STORE_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache/store.h"
#include "core/key.h"
#include "gtest/gtest.h"

namespace kfuse::store_testing {

// A path in a fresh directory, unique per call and per process.
inline std::string FreshDbPath(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string dir =
      absl::StrCat(::testing::TempDir(), "/kfuse_cache_", getpid(), "_", counter.fetch_add(1));
  std::string cmd = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return absl::StrCat(dir, "/", name, ".db");
}

inline CacheKey TestKey(const std::string& chain,
                        const std::string& toolchain = "nvrtc-13.0/sm_90a") {
  return CacheKey{chain, "f32[s0:b1048576]", "sm_90/h200-digest", toolchain, "pointwise/3"};
}

inline EntryMeta TestMeta(const std::string& state = "tuned") {
  return EntryMeta{"pointwise", "sm_90a", "NVIDIA H200", state, "add+relu"};
}

// Deterministic content of a given size, distinct per seed.
inline std::string TestBlob(const std::string& seed, size_t size) {
  std::string out;
  out.reserve(size);
  std::string h = Sha256Hex(seed);
  while (out.size() < size) {
    out += h;
    h = Sha256Hex(h);
  }
  out.resize(size);
  return out;
}

}  // namespace kfuse::store_testing

#endif  // KFUSE_CACHE_STORE_TEST_UTIL_H_
