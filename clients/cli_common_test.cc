#include <cmath>
#include <sstream>

#include "clients/cli.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseArchTest, Table) {
  struct Case {
    const char* in;
    bool ok;
    uint32_t cc;
    bool specific;
  };
  const Case kCases[] = {
      {"", true, 0, false},        {"native", true, 0, false},
      {"sm_90", true, 90, false},  {"sm_90a", true, 90, true},
      {"80", true, 80, false},     {"compute_86", true, 86, false},
      {"sm_", false, 0, false},    {"sm_9x", false, 0, false},
      {"gfx90a", false, 0, false}, {"sm_5", false, 0, false},
      {"sm_+90", false, 0, false}, {"sm_ 90", false, 0, false},
      {"sm_090", false, 0, false}, {"sm_90 ", false, 0, false},
  };
  for (const Case& c : kCases) {
    auto t = ParseArch(c.in);
    ASSERT_EQ(t.ok(), c.ok) << c.in;
    if (!c.ok) {
      EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.in));
      continue;
    }
    EXPECT_EQ(t->compute_capability(), c.cc) << c.in;
    EXPECT_EQ(t->arch_specific(), c.specific) << c.in;
  }
}

TEST(ParsePolicyModeTest, Table) {
  EXPECT_EQ(*ParsePolicyMode("heuristic"),
            kfuse::v1::TuningPolicy::MODE_HEURISTIC);
  EXPECT_EQ(*ParsePolicyMode("QUICK"), kfuse::v1::TuningPolicy::MODE_QUICK);
  EXPECT_EQ(*ParsePolicyMode("full"), kfuse::v1::TuningPolicy::MODE_FULL);
  auto bad = ParsePolicyMode("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--policy 'fast': expected heuristic, quick or full");
  EXPECT_THAT(std::string(ParsePolicyMode("fast", "--mode").status().message()),
              HasSubstr("--mode 'fast'"));
}

TEST(CheckBudgetTest, RefusesNegativeNanAndInfinite) {
  EXPECT_TRUE(CheckBudget(0).ok());
  EXPECT_TRUE(CheckBudget(2.5).ok());
  EXPECT_TRUE(CheckBudget(3600).ok());
  for (double bad : {-1.0, std::nan(""), HUGE_VAL, 3600.5, 1e9}) {  // Past the server's 3600 s too.
    absl::Status s = CheckBudget(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("--budget")) << bad;
  }
  EXPECT_THAT(std::string(CheckBudget(3600.0001).message()), HasSubstr("--budget 3600.0001: "));
}

TEST(IsSafeFileStemTest, RejectsPathsAndDots) {
  EXPECT_TRUE(IsSafeFileStem("kfuse_pointwise_0"));
  EXPECT_FALSE(IsSafeFileStem(""));
  EXPECT_FALSE(IsSafeFileStem("../x"));
  EXPECT_FALSE(IsSafeFileStem("a/b"));
  EXPECT_FALSE(IsSafeFileStem(".hidden"));
  EXPECT_FALSE(IsSafeFileStem(std::string(200, 'a')));
}

TEST(ReportErrorTest, ExitCodesAndHints) {
  GlobalOptions g;
  g.server = "10.0.0.1:1";
  std::ostringstream out, err;
  CliIo io{out, err, false};
  EXPECT_EQ(ReportError(g, absl::UnavailableError("refused"), io),
            kExitUnavailable);
  EXPECT_THAT(err.str(), HasSubstr("UNAVAILABLE: refused"));
  EXPECT_THAT(err.str(), HasSubstr("10.0.0.1:1"));
  EXPECT_EQ(ReportError(g, absl::InvalidArgumentError("op 2 (add): x"), io),
            kExitFailed);
  EXPECT_THAT(err.str(), HasSubstr("INVALID_ARGUMENT: op 2 (add): x"));
  EXPECT_TRUE(out.str().empty());
  EXPECT_THAT(err.str(), Not(HasSubstr("TLS")));  // "refused" is no handshake.
}

// A failed handshake names the TLS flags; a missing token, the token flags.
TEST(ReportErrorTest, HandshakeAndTokenHints) {
  GlobalOptions g;
  std::ostringstream out, err;
  CliIo io{out, err, false};
  ReportError(g, absl::UnavailableError("Socket closed"), io);
  EXPECT_THAT(err.str(), HasSubstr("it may serve TLS: give --tls or --tls-ca"));
  err.str("");
  g.tls_ca = "ca.pem";
  ReportError(g, absl::UnavailableError("SSL handshake failed"), io);
  EXPECT_THAT(err.str(), HasSubstr("--tls-ca signs its certificate"));
  err.str("");
  ReportError(g, absl::UnauthenticatedError("send metadata 'authorization: Bearer <token>'"), io);
  EXPECT_THAT(err.str(), HasSubstr("--token-file (or KFUSE_TOKEN)"));
  err.str("");
  g.token_file = "token";
  ReportError(g, absl::UnauthenticatedError("the token is not accepted"), io);
  EXPECT_THAT(err.str(), HasSubstr("kfused did not accept the token given"));
}

TEST(ReportErrorTest, JsonErrorIsValidJson) {
  GlobalOptions g;
  g.json = true;
  std::ostringstream out, err;
  CliIo io{out, err, false};
  ReportError(g, absl::InvalidArgumentError("bad \"quote\" \xc3\xa9"), io);
  EXPECT_THAT(out.str(), HasSubstr("\"code\":\"INVALID_ARGUMENT\""));
  EXPECT_THAT(out.str(), HasSubstr("\\\"quote\\\""));
}

TEST(RunCompileTest, MissingFileIsUsageErrorWithoutServer) {
  GlobalOptions g;
  g.server = "127.0.0.1:1";
  CompileOptions o;
  o.chain_path = "examples/nope.json";
  std::ostringstream out, err;
  CliIo io{out, err, false};
  EXPECT_EQ(RunCompile(g, o, io), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("examples/nope.json"));
}

TEST(RunCompileTest, BadArchIsUsageError) {
  GlobalOptions g;
  CompileOptions o;
  o.chain_path = "examples/relu_fma_f32.json";
  o.arch = "sm_banana";
  std::ostringstream out, err;
  CliIo io{out, err, false};
  EXPECT_EQ(RunCompile(g, o, io), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--arch sm_banana"));
}

TEST(RunCacheRmTest, NeedsKeysOrAll) {
  GlobalOptions g;
  CacheRmOptions o;
  std::ostringstream out, err;
  CliIo io{out, err, false};
  EXPECT_EQ(RunCacheRm(g, o, io), kExitUsage);
  o.all = true;
  o.keys = {"abc"};
  EXPECT_EQ(RunCacheRm(g, o, io), kExitUsage);
}

TEST(WithoutBinariesTest, StripsCubinAndPtxOnly) {
  kfuse::v1::CompileResponse r;
  auto* k = r.mutable_plan()->add_kernels();
  k->set_entry("e");
  k->set_cubin(
      "\x7f"
      "ELF");
  k->set_ptx(".version");
  const auto stripped = WithoutBinaries(r);
  EXPECT_TRUE(stripped.plan().kernels(0).cubin().empty());
  EXPECT_TRUE(stripped.plan().kernels(0).ptx().empty());
  EXPECT_EQ(stripped.plan().kernels(0).entry(), "e");
}

// --json's error object keeps bytes that are not UTF-8 (from a flag, a
// file) as \x escapes; protobuf would drop them.
TEST(PrintJsonErrorTest, KeepsBytesThatAreNotUtf8AsEscapes) {
  std::ostringstream out;
  PrintJsonError(absl::InvalidArgumentError("unknown command 'fr\xffob'"), out);
  EXPECT_THAT(out.str(), HasSubstr("fr\\\\xffob"));
  std::ostringstream plain;
  PrintJsonError(absl::InvalidArgumentError("caf\xc3\xa9"), plain);
  EXPECT_THAT(plain.str(), HasSubstr("caf\xc3\xa9"));
}

}  // namespace
}  // namespace kfuse::client
