// The subcommands end to end against the in-process fake service.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

TEST_F(CliRunTest, TuneRejectsHeuristicMode) {
  TuneOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.mode = "heuristic";
  EXPECT_EQ(RunTune(g_, o, io_), kExitUsage);
}

TEST_F(CliRunTest, CacheShowAndRmResolvePrefixes) {
  fake_.service().keys = {"abc123", "abd456"};
  EXPECT_EQ(RunCacheShow(g_, "abc", io_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("abc123"));
  EXPECT_EQ(RunCacheShow(g_, "ab", io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("ambiguous"));
  EXPECT_EQ(RunCacheShow(g_, "zz", io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("NOT_FOUND"));
  CacheRmOptions rm;
  rm.keys = {"abd"};
  out_.str("");
  EXPECT_EQ(RunCacheRm(g_, rm, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "deleted 1 kernel\n");
}

TEST_F(CliRunTest, HealthAndDevice) {
  EXPECT_EQ(RunHealth(g_, "", io_), kExitOk);
  EXPECT_EQ(out_.str(), "SERVING\n");
  EXPECT_EQ(RunDevice(g_, io_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("none (no GPU in the fake)"));
}

TEST_F(CliRunTest, ServerRefusalIsExitOne) {
  CompileOptions o;
  o.chain_path = (dir_ / "empty.json").string();
  std::filesystem::create_directories(dir_);
  std::ofstream(o.chain_path) << "{\"inputs\": []}";
  EXPECT_EQ(RunCompile(g_, o, io_), kExitFailed);
  EXPECT_THAT(err_.str(), HasSubstr("INVALID_ARGUMENT: chain: no outputs"));
}

}  // namespace
}  // namespace kfuse::client
