// The main of every kfuse test binary: GoogleTest's, with a temporary folder
// of the process's own. ::testing::TempDir() names it (through TEST_TMPDIR)
// for the whole run, and it is removed when the tests end, so a run of the
// suite leaves nothing behind in the system's temporary folder.
// KFUSE_KEEP_TEST_TMPDIR=1 keeps it and prints its path, to look at what a
// failing test wrote.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace {

// Set in the environment once the folder is made, so that a death test's
// child (which runs this main again) works in its parent's folder.
constexpr char kOwnedMarker[] = "KFUSE_TEST_TMPDIR_OWNED";

// A fresh folder under the temporary folder the environment names, made the
// one TempDir() returns; empty when one exists already or none can be made
// (the tests then write where TempDir() pointed before).
std::string MakeOwnTempDir() {
  if (std::getenv(kOwnedMarker) != nullptr) return "";
  std::string path = ::testing::TempDir() + "kfuse-test.XXXXXX";
  if (mkdtemp(path.data()) == nullptr) {
    std::perror("kfuse tests: mkdtemp");
    return "";
  }
  // As a folder made in /tmp would be: tests that drop root's privileges
  // reach their files through it.
  chmod(path.c_str(), 0755);
  setenv("TEST_TMPDIR", path.c_str(), 1);
  setenv(kOwnedMarker, "1", 1);
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const pid_t owner = getpid();
  const std::string dir = MakeOwnTempDir();
  const int rc = RUN_ALL_TESTS();
  // A forked child that returns here leaves the folder to its parent.
  if (!dir.empty() && getpid() == owner) {
    if (std::getenv("KFUSE_KEEP_TEST_TMPDIR") != nullptr) {
      std::fprintf(stderr, "kfuse tests: kept %s\n", dir.c_str());
    } else {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
  return rc;
}
