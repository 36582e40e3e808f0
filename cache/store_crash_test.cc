// Crash consistency: writer processes are killed with SIGKILL at random
// times; every Put that returned OK must survive, and the file must pass
// PRAGMA integrity_check. KFUSE_KILL_TRIALS sets the rounds (default 20).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/store.h"
#include "cache/store_test_util.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::kfuse::store_testing::FreshDbPath;
using ::kfuse::store_testing::TestBlob;
using ::kfuse::store_testing::TestKey;
using ::kfuse::store_testing::TestMeta;

constexpr int kChildren = 4;

std::string EntryName(int round, int child, int seq) {
  return absl::StrCat("r", round, "c", child, "s", seq);
}
std::string EntryBlob(const std::string& name, int seq) {
  return TestBlob(name, 200 + (seq * 7919) % 20000);
}
bool IsDecision(int seq) { return seq % 2 == 1; }

// Runs in a forked child until killed: Put, then acknowledge on `ack_fd`.
[[noreturn]] void Writer(const std::string& path, int round, int child, int ack_fd) {
  auto store = Store::Open({.path = path});
  if (!store.ok()) {
    std::fprintf(stderr, "child %d: %s\n", child, store.status().ToString().c_str());
    _exit(1);
  }
  for (int seq = 0; seq < 500; ++seq) {
    std::string name = EntryName(round, child, seq);
    CacheKey k = TestKey(name);
    absl::Status st = IsDecision(seq) ? (*store)->PutDecision(k, EntryBlob(name, seq), TestMeta())
                                      : (*store)->PutArtifact(k, EntryBlob(name, seq), TestMeta());
    if (!st.ok()) {
      std::fprintf(stderr, "child %d: put %s: %s\n", child, name.c_str(), st.ToString().c_str());
      continue;
    }
    std::string line = absl::StrCat(round, " ", child, " ", seq, "\n");
    if (write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(2);
  }
  _exit(0);
}

TEST(StoreCrashTest, KilledWritersLoseNoAcknowledgedEntry) {
  const char* env = std::getenv("KFUSE_KILL_TRIALS");
  const int trials = env != nullptr ? std::atoi(env) : 20;
  const unsigned seed = std::random_device{}();
  std::printf("[ crash    ] %d rounds, seed %u\n", trials, seed);
  std::mt19937 rng(seed);
  const std::string path = FreshDbPath("crash");

  struct Acked {
    int round, child, seq;
  };
  std::vector<Acked> acked;
  for (int round = 0; round < trials; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    pid_t pids[kChildren];
    int fds[kChildren];
    for (int c = 0; c < kChildren; ++c) {
      int p[2];
      ASSERT_EQ(pipe(p), 0);
      pids[c] = fork();
      ASSERT_GE(pids[c], 0);
      if (pids[c] == 0) {
        close(p[0]);
        Writer(path, round, c, p[1]);
      }
      close(p[1]);
      fds[c] = p[0];
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 100)(rng)));
    for (int c = 0; c < kChildren; ++c) {
      // Staggered, so that some die while others still write.
      kill(pids[c], SIGKILL);
      if (rng() % 2) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    }
    for (int c = 0; c < kChildren; ++c) {
      int status = 0;
      waitpid(pids[c], &status, 0);
      std::string data;
      char buf[4096];
      for (ssize_t n; (n = read(fds[c], buf, sizeof(buf))) > 0;) data.append(buf, n);
      close(fds[c]);
      std::istringstream lines(data);
      Acked a;
      while (lines >> a.round >> a.child >> a.seq) acked.push_back(a);
    }
    // The file a crash left behind opens, recovers its WAL, and is sound.
    auto store = Store::Open({.path = path});
    ASSERT_TRUE(store.ok()) << store.status();
    absl::Status ic = (*store)->IntegrityCheck();
    ASSERT_TRUE(ic.ok()) << ic;
  }

  auto store = Store::Open({.path = path});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->IntegrityCheck().ok());
  int missing = 0;
  for (const Acked& a : acked) {
    std::string name = EntryName(a.round, a.child, a.seq);
    auto got = IsDecision(a.seq) ? (*store)->GetDecision(TestKey(name))
                                 : (*store)->GetArtifact(TestKey(name));
    ASSERT_TRUE(got.ok()) << got.status();
    if (!got->has_value() || **got != EntryBlob(name, a.seq)) {
      ++missing;
      ADD_FAILURE() << "acknowledged entry " << name << " lost or wrong";
    }
  }
  std::printf("[ crash    ] %zu acknowledged entries, %d lost\n", acked.size(), missing);
  EXPECT_GT(acked.size(), 0u);
  EXPECT_EQ((*store)->quarantined(), 0);
}

}  // namespace
}  // namespace kfuse
