// The subcommands end to end against the in-process fake service.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "clients/cli.h"
#include "clients/fake_kernel_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.ok());
    g_.server = fake_.address();
    g_.timeout_seconds = 10;
    dir_ = std::filesystem::temp_directory_path() /
           ("kfuse_cli_run_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::ostringstream out_, err_;
  CliIo io_{out_, err_, false};
  FakeServer fake_;
  GlobalOptions g_;
  std::filesystem::path dir_;
};

TEST_F(CliRunTest, CompileWritesCubinPlanAndSummary) {
  CompileOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.cubin_dir = (dir_ / "cubins").string();
  o.plan_out = (dir_ / "plan.pb").string();
  o.source = true;
  std::filesystem::create_directories(dir_);
  ASSERT_EQ(RunCompile(g_, o, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("cache    miss"));
  EXPECT_THAT(out_.str(), HasSubstr("kernel 0  kfuse_pw_0  sm_90"));
  std::ifstream cubin(dir_ / "cubins" / "kfuse_pw_0.cubin", std::ios::binary);
  std::string magic(4, '\0');
  cubin.read(magic.data(), 4);
  EXPECT_EQ(magic, std::string("\x7f"
                               "ELF",
                               4));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "cubins" / "kfuse_pw_0.cu"));
  kfuse::v1::KernelPlan plan;
  std::ifstream pb(o.plan_out, std::ios::binary);
  ASSERT_TRUE(plan.ParseFromIstream(&pb));
  EXPECT_EQ(plan.key(), "key-1");

  out_.str("");
  ASSERT_EQ(RunCompile(g_, o, io_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("cache    hit"));
}

TEST_F(CliRunTest, CompileRefusesUnsafeEntryName) {
  fake_.service().entry = "../../etc/evil";
  CompileOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.cubin_dir = (dir_ / "cubins").string();
  EXPECT_EQ(RunCompile(g_, o, io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("not a safe file name"));
}

TEST_F(CliRunTest, CompileAndTuneRefuseABudgetThatIsNotANumber) {
  CompileOptions c;
  c.chain_path = "examples/relu_fma_f32.json";
  c.budget_seconds = std::nan("");
  EXPECT_NE(RunCompile(g_, c, io_), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("--budget nan: expected a number of seconds from 0 to 3600"));
  err_.str("");
  TuneOptions t;
  t.chain_path = "examples/relu_fma_f32.json";
  t.mode = "full";
  t.budget_seconds = -HUGE_VAL;
  EXPECT_NE(RunTune(g_, t, io_), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("--budget -inf: expected a number of seconds from 0 to 3600"));
}

TEST_F(CliRunTest, CompileJsonOmitsCubin) {
  g_.json = true;
  CompileOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  ASSERT_EQ(RunCompile(g_, o, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"key\":\"key-1\""));
  EXPECT_THAT(out_.str(), Not(HasSubstr("cubin")));
}

TEST_F(CliRunTest, TunePlainLines) {
  TuneOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.mode = "full";
  ASSERT_EQ(RunTune(g_, o, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("[1/3] time"));
  EXPECT_THAT(out_.str(), HasSubstr("[3/3] time"));
  EXPECT_THAT(out_.str(), HasSubstr("best 7 us"));
  EXPECT_THAT(out_.str(), HasSubstr("key      tuned"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("\r")));
}

// A trial that passed at the bucket and failed the check at another size
// is shown again as failed, and is no longer the best.
TEST_F(CliRunTest, TuneShowsATrialFailedAtAnotherSizeAndDropsItFromBest) {
  fake_.service().fastest_fails_check = true;
  TuneOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.mode = "full";
  ASSERT_EQ(RunTune(g_, o, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("[3/3] time    pointwise{block=192}  7 us  best 7 us"));
  EXPECT_THAT(out_.str(), HasSubstr("[3/3] check   pointwise{block=192}  wrong_result: at N=769 (passed at "
                                    "N=1024): max abs error 1  best 8 us"));
}

TEST_F(CliRunTest, TuneBarOnTty) {
  io_.out_is_tty = true;
  TuneOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.mode = "full";
  ASSERT_EQ(RunTune(g_, o, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\r[########################] [3/3]"));
}

TEST_F(CliRunTest, TuneJsonLines) {
  g_.json = true;
  TuneOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.mode = "full";
  ASSERT_EQ(RunTune(g_, o, io_), kExitOk) << err_.str();
  std::istringstream lines(out_.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_EQ(line.front(), '{');
  }
  EXPECT_EQ(n, 3);
  EXPECT_THAT(out_.str(), HasSubstr("\"result\""));
}

// A server without a GPU answers with its heuristic kernel: no progress
// line ("[0/0] done" said nothing), the plan, and exit 1 saying why.
TEST_F(CliRunTest, TuneUntimedAnswerFails) {
  fake_.service().untimed = true;
  TuneOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.mode = "full";
  EXPECT_EQ(RunTune(g_, o, io_), kExitFailed);
  EXPECT_THAT(out_.str(), Not(HasSubstr("[0/0]")));
  EXPECT_THAT(out_.str(), HasSubstr("key      tuned"));
  EXPECT_THAT(err_.str(), HasSubstr("not tuned: heuristic (no GPU in the fake)"));
}

TEST_F(CliRunTest, TuneRejectsHeuristicMode) {
  TuneOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.mode = "heuristic";
  EXPECT_EQ(RunTune(g_, o, io_), kExitUsage);
  EXPECT_NE(err_.str().find("--mode 'heuristic': expected quick or full (kfuse compile --policy heuristic"),
            std::string::npos)
      << err_.str();
  err_.str("");
  o.mode = "bogus";  // Lists only what tune takes.
  EXPECT_EQ(RunTune(g_, o, io_), kExitUsage);
  EXPECT_NE(err_.str().find("--mode 'bogus': expected quick or full\n"), std::string::npos) << err_.str();
  err_.str("");
  o.mode = "FULL";
  EXPECT_EQ(RunTune(g_, o, io_), kExitOk) << err_.str();
}

TEST_F(CliRunTest, CacheShowAndRmResolvePrefixes) {
  fake_.service().keys = {"abc123", "abd456"};
  EXPECT_EQ(RunCacheShow(g_, "abc", io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("abc123"));
  out_.str("");
  EXPECT_EQ(RunCacheShow(g_, "ABC", io_), kExitOk) << err_.str();  // Hex in either case.
  EXPECT_THAT(out_.str(), HasSubstr("abc123"));
  EXPECT_EQ(RunCacheShow(g_, "ab", io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("ambiguous"));
  EXPECT_EQ(RunCacheShow(g_, "zz", io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_FOUND"));
  CacheRmOptions rm;
  rm.keys = {"abd"};
  out_.str("");
  EXPECT_EQ(RunCacheRm(g_, rm, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "deleted 1 store entry (kernels and the tuning decisions they were built from)\n");
  // --all counts the tuning decisions it deletes too (7 in the fake).
  rm.keys.clear();
  rm.all = true;
  out_.str("");
  EXPECT_EQ(RunCacheRm(g_, rm, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "deleted 7 store entries (kernels and tuning decisions)\n");
}

TEST_F(CliRunTest, HealthAndDevice) {
  EXPECT_EQ(RunHealth(g_, "", io_), kExitOk);
  EXPECT_EQ(out_.str(), "SERVING\n");
  EXPECT_EQ(RunDevice(g_, io_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("none: no GPU in the fake; answers"));
}

TEST_F(CliRunTest, ServerRefusalIsExitOne) {
  CompileOptions o;
  o.chain_path = (dir_ / "empty.json").string();
  std::filesystem::create_directories(dir_);
  std::ofstream(o.chain_path) << "{\"inputs\": []}";
  EXPECT_EQ(RunCompile(g_, o, io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("INVALID_ARGUMENT: chain: no outputs"));
}

kfuse::v1::StoreEntry Entry(const std::string& kind, const std::string& key,
                            size_t blob_bytes = 8) {
  kfuse::v1::StoreEntry e;
  e.set_kind(kind);
  e.set_key(key);
  e.set_blob(std::string(blob_bytes, 'b'));
  e.set_signature("sig");
  return e;
}

TEST_F(CliRunTest, CacheExplainTableAndJson) {
  CacheExplainOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.arch = "sm_80";
  ASSERT_EQ(RunCacheExplain(g_, o, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("stored   no (a miss)"));
  EXPECT_THAT(out_.str(), HasSubstr("*  toolchain  fake-1/sm_80"));
  EXPECT_THAT(out_.str(), HasSubstr("*  device     untuned:sm_80"));
  EXPECT_THAT(out_.str(), HasSubstr("   chain      c0ffee         (same)"));
  EXPECT_THAT(out_.str(), HasSubstr("differs in device, toolchain"));
  out_.str("");
  g_.json = true;
  o.arch = "";
  ASSERT_EQ(RunCacheExplain(g_, o, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"found\":true"));
  EXPECT_THAT(out_.str(), HasSubstr("\"nearestValue\""));
  o.arch = "sm_9000";
  EXPECT_EQ(RunCacheExplain(g_, o, io_), kExitUsage);
}

TEST_F(CliRunTest, CacheExportThenImportRoundTrips) {
  fake_.service().entries = {Entry("decision", "d1"), Entry("artifact", "a1"),
                             Entry("artifact", "a2")};
  std::filesystem::create_directories(dir_);
  CacheExportOptions ex;
  ex.all = true;
  ex.out = (dir_ / "b.kfb").string();
  ASSERT_EQ(RunCacheExport(g_, ex, io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(),
              HasSubstr("exported 3 entries (1 decision, 2 artifacts)"));
  EXPECT_FALSE(std::filesystem::exists(ex.out + ".partial"));
  std::ifstream f(ex.out, std::ios::binary);
  std::string magic(16, '\0');
  f.read(magic.data(), 16);
  EXPECT_EQ(magic, "KFUSE-BUNDLE-v1\n");

  auto reader = BundleReader::Open(ex.out);
  ASSERT_TRUE(reader.ok()) << reader.status();
  kfuse::v1::StoreEntry e;
  std::vector<std::string> keys;
  while (*(*reader)->Next(&e)) keys.push_back(e.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"d1", "a1", "a2"}));
  EXPECT_EQ((*reader)->offset(),
            static_cast<int64_t>(std::filesystem::file_size(ex.out)));

  out_.str("");
  ASSERT_EQ(RunCacheImport(g_, ex.out, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "imported 3, already present 0, rejected 0\n");
  out_.str("");
  ASSERT_EQ(RunCacheImport(g_, ex.out, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "imported 0, already present 3, rejected 0\n");
  // In JSON every count is there, zeros too.
  out_.str("");
  g_.json = true;
  ASSERT_EQ(RunCacheImport(g_, ex.out, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "{\"imported\":0,\"alreadyPresent\":3,\"rejected\":[],\"evicted\":0}\n");
}

// -o naming something that is not a regular file (a pipe here; /dev/null
// or /dev/stdout alike) is written in place, not replaced by a renamed file.
TEST_F(CliRunTest, CacheExportWritesIntoAPipeInPlace) {
  fake_.service().entries = {Entry("decision", "d1"), Entry("artifact", "a1")};
  std::filesystem::create_directories(dir_);
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string read;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    read.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
  g_.json = true;
  CacheExportOptions ex;
  ex.all = true;
  ex.out = fifo;
  const int rc = RunCacheExport(g_, ex, io_);
  // Had the export not opened the pipe, the reader would wait in open()
  // forever: a writer opening and closing it ends that wait (no effect once
  // the export wrote and closed it).
  if (int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK); fd >= 0) ::close(fd);
  reader.join();
  ASSERT_EQ(rc, kExitOk) << err_.str();
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_FALSE(std::filesystem::exists(fifo + ".partial"));
  EXPECT_EQ(read.substr(0, 16), "KFUSE-BUNDLE-v1\n");
  // Written in place (the pipe may be stdout): the summary goes to stderr.
  EXPECT_EQ(out_.str(), "");
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat("\"bytes\":", read.size())));
}

// A pipe can be read once: the import keeps the entries it checked and
// sends those.
TEST_F(CliRunTest, CacheImportReadsAPipeOnce) {
  fake_.service().entries = {Entry("decision", "d1"), Entry("artifact", "a1")};
  std::filesystem::create_directories(dir_);
  CacheExportOptions ex;
  ex.all = true;
  ex.out = (dir_ / "all.kfb").string();
  ASSERT_EQ(RunCacheExport(g_, ex, io_), kExitOk) << err_.str();
  std::ifstream file(ex.out, std::ios::binary);
  const std::string bundle((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::ofstream(fifo, std::ios::binary) << bundle;
    // Had the import opened the pipe again, it would wait there for a
    // writer: opening and closing one ends that wait with an empty read, so
    // the test fails instead of hanging.
    while (!done.load()) {
      if (int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK); fd >= 0) ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  out_.str("");
  const int rc = RunCacheImport(g_, fifo, io_);
  done = true;
  writer.join();
  ASSERT_EQ(rc, kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("imported 2"));
  EXPECT_EQ(fake_.service().imported, (std::set<std::string>{"d1", "a1"}));
}

// Errors found before anything is sent (a global flag, a file a flag names,
// a directory given as a file) are usage errors: exit 2, naming the flag or
// the path.
TEST_F(CliRunTest, BadGlobalFlagsAndDirectoriesAreUsageErrors) {
  std::filesystem::create_directories(dir_);
  GlobalOptions g = g_;
  g.timeout_seconds = 0;
  EXPECT_EQ(RunDevice(g, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("--timeout must be positive"));
  g = g_;
  // Not port 34463, 0 or 65535, as gRPC would take them.
  for (const char* server : {"127.0.0.1:99999", "127.0.0.1:4294967296", "[::1]:-1", "dns:///h:70000"}) {
    g.server = server;
    EXPECT_EQ(RunDevice(g, io_), kExitUsage) << server;
    EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat("--server ", server, ": the port must be 0 to 65535")));
  }
  g = g_;
  g.token_file = dir_.string();
  EXPECT_EQ(RunDevice(g, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat("--token-file ", dir_.string(), ": Is a directory")));
  g = g_;
  g.tls_cert = "cert.pem";
  EXPECT_EQ(RunHealth(g, "", io_), kExitUsage);
  CompileOptions o;
  o.chain_path = dir_.string();
  EXPECT_EQ(RunCompile(g_, o, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat(dir_.string(), ": Is a directory")));
  EXPECT_EQ(RunCacheImport(g_, dir_.string(), io_), kExitUsage);
}

// An empty pipe is no bundle, as an empty file is, not a failed read.
TEST_F(CliRunTest, CacheImportOfAPipeThatIsNoBundle) {
  EXPECT_EQ(RunCacheImport(g_, "/dev/null", io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("/dev/null: not a kfuse bundle"));
  EXPECT_THAT(err_.str(), Not(HasSubstr("temporary file")));
  // An endless pipe that is no bundle is refused at its first bytes.
  EXPECT_EQ(RunCacheImport(g_, "/dev/zero", io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("/dev/zero: not a kfuse bundle"));
}

// A symbolic link (as /dev/stdout is) is written through, not renamed over.
TEST_F(CliRunTest, CacheExportWritesThroughASymbolicLink) {
  fake_.service().entries = {Entry("artifact", "a1")};
  std::filesystem::create_directories(dir_);
  const std::filesystem::path target = dir_ / "real.kfb", link = dir_ / "link.kfb";
  std::ofstream(target) << "old";
  std::filesystem::create_symlink(target, link);
  CacheExportOptions ex;
  ex.all = true;
  ex.out = link.string();
  ASSERT_EQ(RunCacheExport(g_, ex, io_), kExitOk) << err_.str();
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  auto reader = BundleReader::Open(target.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  kfuse::v1::StoreEntry e;
  ASSERT_TRUE(*(*reader)->Next(&e));
  EXPECT_EQ(e.key(), "a1");
}

// "-" is standard output itself: the bundle there, the summary on stderr.
TEST_F(CliRunTest, CacheExportToDashWritesTheBundleToStandardOutput) {
  fake_.service().entries = {Entry("artifact", "a1")};
  CacheExportOptions ex;
  ex.all = true;
  ex.out = "-";
  ASSERT_EQ(RunCacheExport(g_, ex, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str().substr(0, 16), "KFUSE-BUNDLE-v1\n");
  EXPECT_THAT(err_.str(), HasSubstr("to standard output"));
  EXPECT_FALSE(std::filesystem::exists("-"));
}

TEST_F(CliRunTest, CacheImportPrintsRejectionsAndFails) {
  fake_.service().entries = {Entry("artifact", "a1"),
                             Entry("artifact", "a2bcdef")};
  fake_.service().entries[1].set_signature("forged");
  std::filesystem::create_directories(dir_);
  CacheExportOptions ex;
  ex.keys = {"a"};
  ex.out = (dir_ / "b.kfb").string();
  ASSERT_EQ(RunCacheExport(g_, ex, io_), kExitOk) << err_.str();
  out_.str("");
  EXPECT_EQ(RunCacheImport(g_, ex.out, io_), kExitFailed);
  EXPECT_EQ(out_.str(),
            "rejected artifact a2bcdef: signature does not verify\n"
            "imported 1, already present 0, rejected 1\n");
}

TEST_F(CliRunTest, CacheExportNeedsOneSelectionAndReportsServerErrors) {
  CacheExportOptions ex;
  ex.out = (dir_ / "b.kfb").string();
  EXPECT_EQ(RunCacheExport(g_, ex, io_), kExitUsage);
  ex.all = true;
  ex.prefix = "ab";
  EXPECT_EQ(RunCacheExport(g_, ex, io_), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr("exactly one of KEY..., --prefix and --all"));
  std::filesystem::create_directories(dir_);
  CacheExportOptions unknown;
  unknown.keys = {"zz"};
  unknown.out = ex.out;
  EXPECT_EQ(RunCacheExport(g_, unknown, io_), kExitFailed);
  EXPECT_THAT(
      err_.str(),
      HasSubstr("NOT_FOUND: no stored artifact has a key starting with zz"));
  EXPECT_FALSE(std::filesystem::exists(ex.out));
  EXPECT_FALSE(std::filesystem::exists(ex.out + ".partial"));

  // A prefix that matches nothing: no file, and nothing on standard output
  // when the bundle would have gone there.
  CacheExportOptions prefix;
  prefix.prefix = "zz";
  prefix.out = ex.out;
  EXPECT_EQ(RunCacheExport(g_, prefix, io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_FOUND: key_prefix: no stored artifact has a key starting with zz"));
  EXPECT_FALSE(std::filesystem::exists(ex.out));
  out_.str("");
  prefix.out = "-";
  EXPECT_EQ(RunCacheExport(g_, prefix, io_), kExitFailed);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CliRunTest, CacheImportBatchesByBytesAndCount) {
  // Three 3 MiB entries: two fit in an 8 MiB batch, the third goes alone.
  fake_.service().entries = {Entry("artifact", "a1", 3 << 20),
                             Entry("artifact", "a2", 3 << 20),
                             Entry("artifact", "a3", 3 << 20)};
  std::filesystem::create_directories(dir_);
  CacheExportOptions ex;
  ex.all = true;
  ex.out = (dir_ / "big.kfb").string();
  ASSERT_EQ(RunCacheExport(g_, ex, io_), kExitOk) << err_.str();
  ASSERT_EQ(RunCacheImport(g_, ex.out, io_), kExitOk) << err_.str();
  EXPECT_EQ(fake_.service().import_batches, (std::vector<int>{2, 1}));

  // 10001 small entries: 10000, then 1.
  const std::string many = (dir_ / "many.kfb").string();
  {
    std::ofstream out(many, std::ios::binary);
    out.write(kBundleMagic, kBundleMagicSize);
    for (int i = 0; i < 10001; ++i) {
      const std::string bytes =
          Entry("artifact", "k" + std::to_string(i), 1).SerializeAsString();
      out.put(static_cast<char>(bytes.size()));  // < 128: a one-byte varint.
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  }
  fake_.service().import_batches.clear();
  ASSERT_EQ(RunCacheImport(g_, many, io_), kExitOk) << err_.str();
  EXPECT_EQ(fake_.service().import_batches, (std::vector<int>{10000, 1}));
}

TEST_F(CliRunTest, DamagedBundlesNameTheFileAndOffsetAndSendNothing) {
  std::filesystem::create_directories(dir_);
  const std::string bad_magic = (dir_ / "bad.kfb").string();
  std::ofstream(bad_magic, std::ios::binary) << "KFUSE-BUNDLE-v0\nxxxx";
  EXPECT_EQ(RunCacheImport(g_, bad_magic, io_), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr(bad_magic + ": not a kfuse bundle (offset 0"));

  const std::string entry = Entry("artifact", "a1", 40).SerializeAsString();
  const std::string truncated = (dir_ / "trunc.kfb").string();
  {
    std::ofstream out(truncated, std::ios::binary);
    out.write(kBundleMagic, kBundleMagicSize);
    out.put(static_cast<char>(entry.size()));
    out << entry;
    out.put(static_cast<char>(entry.size()));
    out << entry.substr(0, 10);
  }
  err_.str("");
  EXPECT_EQ(RunCacheImport(g_, truncated, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat(
                              truncated, ": entry 1 at offset ",
                              17 + entry.size(), ": truncated: ", entry.size(),
                              " bytes expected, 10 left in the file")));

  // A length near the limit in a file of a few bytes is found truncated
  // without allocating what it claims (it once took a gigabyte).
  const std::string claims = (dir_ / "claims.kfb").string();
  {
    std::ofstream out(claims, std::ios::binary);
    out.write(kBundleMagic, kBundleMagicSize);
    for (uint64_t v = static_cast<uint64_t>(kMaxBundleEntryBytes) - 1; v != 0; v >>= 7) {
      out.put(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
    }
    out << "ab";
  }
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  err_.str("");
  EXPECT_EQ(RunCacheImport(g_, claims, io_), kExitUsage);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat(": truncated: ", kMaxBundleEntryBytes - 1,
                                                 " bytes expected, 2 left in the file")));
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 << 10);  // KiB: under 256 MiB more at the peak.

  const std::string garbage = (dir_ / "garbage.kfb").string();
  {
    std::ofstream out(garbage, std::ios::binary);
    out.write(kBundleMagic, kBundleMagicSize);
    out.put(3);
    out << "\xff\xff\xff";
  }
  err_.str("");
  EXPECT_EQ(RunCacheImport(g_, garbage, io_), kExitUsage);
  EXPECT_THAT(err_.str(),
              HasSubstr(": entry 0 at offset 16: not a kfuse.v1.StoreEntry"));
  EXPECT_EQ(RunCacheImport(g_, (dir_ / "none.kfb").string(), io_), kExitUsage);
  EXPECT_TRUE(fake_.service().import_batches.empty());
}

}  // namespace
}  // namespace kfuse::client
