// A throw-away PostgreSQL server for tests of the fleet tier
// (tests/pg/pg-ephemeral): started once per test binary that asks for one,
// stopped at exit. A machine without PostgreSQL fails the test with the
// install hint; the fleet tier is never skipped.
#ifndef KFUSE_CACHE_FLEET_TEST_UTIL_H_
#define KFUSE_CACHE_FLEET_TEST_UTIL_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kfuse::testing {

class EphemeralPostgres {
 public:
  // Starts the server; port() is 0 and error() says why when it failed.
  EphemeralPostgres() {
    char tmpl[] = "/tmp/kfuse-pg-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    int rc = Run("start");
    std::ifstream in(dir_ + "/port");
    if (rc != 0 || !(in >> port_)) {
      error_ = absl::StrCat("tests/pg/pg-ephemeral start failed (rc ", rc, "); see ", dir_,
                            "/server.log. PostgreSQL must be installed (scripts/setup does)");
      port_ = 0;
    }
  }
  ~EphemeralPostgres() {
    if (!dir_.empty()) {
      Run("stop");
      std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
    }
  }

  int port() const { return port_; }
  const std::string& error() const { return error_; }
  std::string Dsn(const std::string& user = "kfuse_writer", const std::string& db = "kfuse") const {
    return absl::StrCat("host=127.0.0.1 port=", port_, " dbname=", db, " user=", user);
  }
  // Immediate shutdown (as a crash), and a restart on the same port.
  int Kill() { return Run("kill"); }
  int Restart() { return Run("restart"); }
  // One SQL statement as the superuser; its first output line.
  std::string Query(const std::string& sql, const std::string& db = "kfuse") const {
    std::string cmd = absl::StrCat("psql -X -q -At -h 127.0.0.1 -p ", port_, " -U postgres -d ", db, " -c \"", sql,
                                   "\" 2>&1");
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[512];
      if (fgets(buf, sizeof(buf), f) != nullptr) out = buf;
      pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }
  // psql -f `path` as the superuser, stopping at the first error; its exit
  // status.
  int ApplyFile(const std::string& path, const std::string& db = "kfuse") const {
    return std::system(absl::StrCat("psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p ", port_, " -U postgres -d ", db,
                                    " -f '", path, "' >/dev/null 2>&1")
                           .c_str());
  }

 private:
  int Run(const char* cmd) const {
    return std::system(absl::StrCat("bash tests/pg/pg-ephemeral ", cmd, " '", dir_, "' >/dev/null").c_str());
  }

  std::string dir_;
  std::string error_;
  int port_ = 0;
};

}  // namespace kfuse::testing

#endif  // KFUSE_CACHE_FLEET_TEST_UTIL_H_
