#include "clients/cli_format.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

kfuse::v1::Expr Const(int64_t v) {
  kfuse::v1::Expr e;
  e.set_constant(v);
  return e;
}
kfuse::v1::Expr Sym(uint32_t s) {
  kfuse::v1::Expr e;
  e.set_symbol(s);
  return e;
}
kfuse::v1::Expr Bin(kfuse::v1::Expr::Op op, kfuse::v1::Expr l,
                    kfuse::v1::Expr r) {
  kfuse::v1::Expr e;
  e.mutable_binary()->set_op(op);
  *e.mutable_binary()->mutable_lhs() = std::move(l);
  *e.mutable_binary()->mutable_rhs() = std::move(r);
  return e;
}

kfuse::v1::KernelPlan PlanWithSymbolN() {
  kfuse::v1::KernelPlan plan;
  plan.add_symbols()->set_name("N");
  return plan;
}

TEST(FormatExprTest, Table) {
  const auto plan = PlanWithSymbolN();
  using E = kfuse::v1::Expr;
  struct Case {
    kfuse::v1::Expr e;
    const char* want;
  };
  const Case kCases[] = {
      {Const(256), "256"},
      {Sym(0), "N"},
      {Sym(7), "$7"},
      {kfuse::v1::Expr(), "1"},
      {Bin(E::OP_CEIL_DIV, Sym(0), Const(1024)), "ceil_div(N, 1024)"},
      {Bin(E::OP_MUL, Sym(0), Const(4)), "(N * 4)"},
      {Bin(E::OP_MIN, Bin(E::OP_SUB, Sym(0), Const(1)), Const(65535)),
       "min((N - 1), 65535)"},
  };
  for (const Case& c : kCases) EXPECT_EQ(FormatExpr(c.e, plan), c.want);
}

TEST(FormatUnitsTest, Table) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(12.0 * 1024 * 1024), "12.0 MiB");
  EXPECT_EQ(FormatBytes(3.0 * 1024 * 1024 * 1024), "3.00 GiB");
  EXPECT_EQ(FormatSeconds(0), "0 s");
  EXPECT_EQ(FormatSeconds(850e-9), "850 ns");
  EXPECT_EQ(FormatSeconds(0.25e-9), "0.25 ns");  // A tiny plan's prediction, not "0 ns".
  EXPECT_EQ(FormatSeconds(4.1e-6), "4.1 us");
  EXPECT_EQ(FormatSeconds(0.0123), "12.3 ms");
  EXPECT_EQ(FormatSeconds(2.5), "2.5 s");
  EXPECT_EQ(FormatCount(2.1e9), "2.1 G");
  EXPECT_EQ(FormatCount(12), "12 ");
}

TEST(FormatVariantTest, ParamsSortedByName) {
  kfuse::v1::Variant v;
  v.set_family(kfuse::v1::FAMILY_POINTWISE);
  (*v.mutable_params())["vec"] = 4;
  (*v.mutable_params())["block"] = 256;
  (*v.mutable_params())["items"] = 2;
  EXPECT_EQ(FormatVariant(v), "pointwise{block=256, items=2, vec=4}");
}

TEST(EnumNamesTest, ShortLowerCase) {
  EXPECT_EQ(CacheOutcomeName(kfuse::v1::CACHE_OUTCOME_HIT), "hit");
  EXPECT_EQ(CacheOutcomeName(kfuse::v1::CACHE_OUTCOME_MISS), "miss");
  EXPECT_EQ(TuneStateName(kfuse::v1::TUNE_STATE_HEURISTIC), "heuristic");
  EXPECT_EQ(BoundName(kfuse::v1::BOUND_MEMORY), "memory");
  EXPECT_EQ(TrialOutcomeName(kfuse::v1::Trial::OUTCOME_WRONG_RESULT),
            "wrong_result");
  EXPECT_EQ(FamilyName(static_cast<kfuse::v1::Family>(99)), "unknown(99)");
}

kfuse::v1::CompileResponse SampleResponse() {
  using E = kfuse::v1::Expr;
  kfuse::v1::CompileResponse r;
  r.set_cache(kfuse::v1::CACHE_OUTCOME_MISS);
  auto& plan = *r.mutable_plan();
  plan.set_key("k1f00d");
  plan.add_symbols()->set_name("N");
  auto* out = plan.add_outputs();
  out->set_name("out");
  out->set_dtype(kfuse::v1::DTYPE_BF16);
  out->add_shape()->set_symbol("N");
  plan.mutable_provenance()->set_state(kfuse::v1::TUNE_STATE_HEURISTIC);
  plan.mutable_provenance()->set_reason("no GPU: libcuda.so.1 not found");
  auto* k = plan.add_kernels();
  k->set_entry("kfuse_pointwise_0");
  k->set_arch("sm_90");
  k->set_cubin(std::string(2048, 'x'));
  k->mutable_variant()->set_family(kfuse::v1::FAMILY_POINTWISE);
  (*k->mutable_variant()->mutable_params())["block"] = 256;
  *k->mutable_grid()->mutable_x() = Bin(E::OP_CEIL_DIV, Sym(0), Const(1024));
  *k->mutable_block()->mutable_x() = Const(256);
  k->mutable_resources()->set_registers(24);
  auto& rep = *k->mutable_report();
  rep.set_bound(kfuse::v1::BOUND_MEMORY);
  rep.set_bytes(12.0 * 1024 * 1024);
  rep.mutable_flops()->set_fma(2e6);
  rep.mutable_flops()->set_special(1e6);
  rep.set_intensity(0.238);
  rep.set_predicted_seconds(4.1e-6);
  (*rep.mutable_sizes())["N"] = 1048576;
  rep.set_ceilings_source("nominal sm_90");
  k->add_ops(0);
  k->add_ops(1);
  k->add_ops(2);
  k->add_ops(4);
  k->set_partition_reason("all element-wise");
  return r;
}

TEST(FormatPlanSummaryTest, NamesEverythingTheUserAsksAbout) {
  const std::string s = FormatPlanSummary(SampleResponse());
  for (const char* want :
       {"key      k1f00d", "cache    miss",
        "heuristic (no GPU: libcuda.so.1 not found)", "out bf16[N]",
        "kernel 0  kfuse_pointwise_0  sm_90  2.00 KiB cubin",
        "pointwise{block=256}", "grid (ceil_div(N, 1024), 1, 1)",
        "block (256, 1, 1)", "24 registers", "memory-bound, 12.0 MiB",
        "3 MFLOP (special 1 M)", "predicted 4.1 us", "N=1048576",
        "nominal sm_90", "ops 0-2, 4: all element-wise"}) {
    EXPECT_THAT(s, HasSubstr(want)) << s;
  }
  EXPECT_THAT(s, Not(HasSubstr("measured")));
}

// A plan of several kernels names the buffers a client allocates between
// them.
TEST(FormatPlanSummaryTest, APlanListsItsIntermediates) {
  auto r = SampleResponse();
  auto& plan = *r.mutable_plan();
  *plan.add_kernels() = plan.kernels(0);
  *plan.mutable_report() = plan.kernels(0).report();
  for (int64_t width : {int64_t{-1}, int64_t{1000}}) {
    auto* im = plan.add_intermediates();
    im->set_dtype(kfuse::v1::DTYPE_F32);
    *im->add_shape() = Const(1);
    *im->add_shape() = width < 0 ? Sym(0) : Const(width);
  }
  EXPECT_THAT(FormatPlanSummary(r),
              HasSubstr("plan     2 kernels, intermediates f32[1,N], f32[1,1000]; memory-bound"));
  plan.clear_intermediates();
  EXPECT_THAT(FormatPlanSummary(r), HasSubstr("plan     2 kernels, memory-bound"));
}

TEST(FormatPlanSummaryTest, TunedShowsMeasuredAndTrials) {
  auto r = SampleResponse();
  r.set_cache(kfuse::v1::CACHE_OUTCOME_HIT);
  auto& p = *r.mutable_plan()->mutable_provenance();
  p.set_state(kfuse::v1::TUNE_STATE_TUNED);
  p.clear_reason();
  p.mutable_device()->set_name("NVIDIA H200");
  p.set_trials(37);
  p.set_tuning_seconds(2.3);
  auto& rep = *r.mutable_plan()->mutable_kernels(0)->mutable_report();
  rep.set_measured_seconds(5e-6);
  rep.set_fraction_of_roofline(0.82);
  const std::string s = FormatPlanSummary(r);
  EXPECT_THAT(s, HasSubstr("cache    hit"));
  EXPECT_THAT(s, HasSubstr("tuned on NVIDIA H200, 37 trials in 2.3 s"));
  EXPECT_THAT(s, HasSubstr("measured 5 us (82% of roofline)"));
  EXPECT_THAT(s, Not(HasSubstr("failed")));
  EXPECT_THAT(s, Not(HasSubstr("checked at")));
  // The sizes its check passed at, bucket first.
  for (int64_t n : {1048576, 786433, 3}) {
    (*r.mutable_plan()->mutable_kernels(0)->add_checked_at()->mutable_sizes())["N"] = n;
  }
  EXPECT_THAT(FormatPlanSummary(r), HasSubstr("checked at  N=1048576; N=786433; N=3"));
  // Variants that faulted or computed wrong answers are counted in the state.
  auto* fault = p.add_failed_trials();
  fault->set_outcome(kfuse::v1::Trial::OUTCOME_FAULT);
  fault->set_count(2);
  auto* wrong = p.add_failed_trials();
  wrong->set_outcome(kfuse::v1::Trial::OUTCOME_WRONG_RESULT);
  wrong->set_count(1);
  EXPECT_THAT(FormatPlanSummary(r),
              HasSubstr("tuned on NVIDIA H200, 37 trials in 2.3 s, 3 failed (fault 2, wrong_result 1)"));
}

// A client's names may hold anything; a table prints them on one line.
TEST(FormatTableTest, EscapesControlCharacters) {
  EXPECT_EQ(FormatTable({{"outputs", "o f32[*/ evil \n x]"}, {"name", "\x1b[31mred"}}),
            "outputs  o f32[*/ evil \\n x]\n"
            "name     \\x1b[31mred\n");
}

// C1 controls in UTF-8 (U+009B is the 8-bit CSI some terminals act on)
// are escaped too; other text outside ASCII is kept. PrintableLines keeps a
// message's lines and tabs.
TEST(PrintableTest, EscapesC1ControlsAndKeepsLinesWhereAsked) {
  EXPECT_EQ(Printable("a\xc2\x9b" "31m \xc2\xa0 \xc3\xa9"), "a\\xc2\\x9b" "31m \xc2\xa0 \xc3\xa9");
  EXPECT_EQ(Printable("a\nb\tc\x7f"), "a\\nb\\tc\\x7f");
  EXPECT_EQ(PrintableLines("a\nb\tc\x1b]0;t\x07"), "a\nb\tc\\x1b]0;t\\x07");
  EXPECT_EQ(Printable("ends in \xc2"), "ends in \xc2");
  // A backslash in a one-line text is doubled: an escape is not a name's text.
  EXPECT_EQ(Printable("a\\n b\n"), "a\\\\n b\\n");
  EXPECT_EQ(PrintableLines("a\\n"), "a\\n");
}

TEST(FormatTableTest, AlignsColumns) {
  EXPECT_EQ(FormatTable({{"a", "bb", "c"}, {"ddd", "e", "f"}}),
            "a    bb  c\nddd  e   f\n");
}

TEST(FormatPlanSummaryTest, ASmallSpecialCountHasNoStraySpace) {
  kfuse::v1::CompileResponse r = SampleResponse();
  r.mutable_plan()->mutable_kernels(0)->mutable_report()->mutable_flops()->set_special(1);
  EXPECT_THAT(FormatPlanSummary(r), HasSubstr("MFLOP (special 1), "));
}

TEST(FormatKernelTableTest, EmptyAndRows) {
  kfuse::v1::ListKernelsResponse r;
  EXPECT_EQ(FormatKernelTable(r, 0), "no kernels in the store\n");
  auto* k = r.add_kernels();
  k->set_key("0123456789abcdef0123456789abcdef");
  k->set_family(kfuse::v1::FAMILY_POINTWISE);
  k->set_arch("sm_90");
  k->set_state(kfuse::v1::TUNE_STATE_HEURISTIC);
  k->set_bytes(4096);
  k->set_hits(3);
  k->set_last_used_unix_ms(1000000);
  k->set_description("%0 = input(#0)\n%1 = relu(%0)\n" + std::string(80, 'x'));
  r.set_total_bytes(4096);
  const std::string s = FormatKernelTable(r, 1000000 + 125000);
  EXPECT_THAT(s, HasSubstr("0123456789abcdef  pointwise"));
  EXPECT_THAT(s, Not(HasSubstr("0123456789abcdef0")));
  EXPECT_THAT(s, HasSubstr("2m ago"));
  EXPECT_THAT(s, HasSubstr("%0 = input(#0); %1 = relu(%0); xxx"));
  EXPECT_THAT(s, HasSubstr("x...\n"));
  EXPECT_THAT(s, HasSubstr("1 entry, 4.00 KiB in the store"));
  r.set_more(true);
  EXPECT_THAT(FormatKernelTable(r, 0),
              HasSubstr("the first 1 entry (more match: --limit N lists up to 10000), 4.00 KiB"));
  EXPECT_EQ(FormatKernelTable(kfuse::v1::ListKernelsResponse(), 0, "zz"), "no kernel key starts with zz\n");
}

TEST(FormatKernelSummaryTest, ChainIndented) {
  kfuse::v1::KernelSummary k;
  k.set_key("abc");
  k.set_description("%0 = input(#0)\n%1 = relu(%0)\n");
  const std::string s = FormatKernelSummary(k);
  EXPECT_THAT(s, HasSubstr("key         abc\n"));
  EXPECT_THAT(s, HasSubstr("chain\n  %0 = input(#0)\n  %1 = relu(%0)\n"));
  // An imported entry's text reaches the terminal escaped, as in `cache ls`.
  k.set_description("\x1b[31mRED\x1b[0m\nFAKE line\r\x07");
  EXPECT_THAT(FormatKernelSummary(k), HasSubstr("chain\n  \\x1b[31mRED\\x1b[0m\n  FAKE line\\r\\x07\n"));
}

TEST(FormatDeviceInfoTest, NoGpuSaysWhy) {
  kfuse::v1::DeviceInfo d;
  d.set_reason("libcuda.so.1: cannot open shared object file");
  d.set_nvrtc_version("13.0");
  d.add_supported_archs("sm_80");
  d.add_supported_archs("sm_90");
  const std::string s = FormatDeviceInfo(d);
  EXPECT_THAT(s, HasSubstr("none: libcuda.so.1: cannot open shared object"));
  EXPECT_THAT(s, HasSubstr("sm_80 sm_90"));
  EXPECT_THAT(s, HasSubstr("13.0"));
}

TEST(FormatProgressTest, LineAndBar) {
  kfuse::v1::TuneProgress p;
  p.set_phase("time");
  p.set_done(3);
  p.set_total(12);
  p.mutable_trial()->set_outcome(kfuse::v1::Trial::OUTCOME_OK);
  p.mutable_trial()->set_median_seconds(4.1e-6);
  p.mutable_trial()->mutable_variant()->set_family(kfuse::v1::FAMILY_POINTWISE);
  EXPECT_EQ(FormatProgressLine(p, 3.9e-6),
            "[ 3/12] time    pointwise{}  4.1 us  best 3.9 us");
  p.mutable_trial()->set_outcome(kfuse::v1::Trial::OUTCOME_FAULT);
  p.mutable_trial()->set_message("illegal address");
  EXPECT_THAT(FormatProgressLine(p, 0), HasSubstr("fault: illegal address"));
  p.set_kernel(1);
  p.set_kernels(2);
  p.mutable_trial()->set_outcome(kfuse::v1::Trial::OUTCOME_OK);
  EXPECT_EQ(FormatProgressLine(p, 3.9e-6), "kernel 2/2 [ 3/12] time    pointwise{}  4.1 us  best 3.9 us");
  EXPECT_EQ(FormatProgressBar(3, 12, 8), "[##......]");
  EXPECT_EQ(FormatProgressBar(0, 0, 4), "[....]");
  EXPECT_EQ(FormatProgressBar(20, 10, 4), "[####]");
}

TEST(FormatExplainTest, MarksTheDifferingParts) {
  kfuse::v1::ExplainResponse r;
  r.set_key("k80");
  r.set_nearest_key("k90");
  r.set_fleet("off");
  r.add_differing_parts("toolchain");
  auto* chain = r.add_parts();
  chain->set_name("chain");
  chain->set_value("c0ffee");
  chain->set_nearest_value("c0ffee");
  auto* tc = r.add_parts();
  tc->set_name("toolchain");
  tc->set_value("nvrtc-13.0/sm_80");
  tc->set_nearest_value("nvrtc-13.0/sm_90");
  r.set_text("no artifact k80; differs in toolchain");
  const std::string out = FormatExplain(r);
  EXPECT_THAT(out, HasSubstr("stored   no (a miss)\n"));
  EXPECT_THAT(out, HasSubstr("nearest  k90\n"));
  EXPECT_THAT(out, HasSubstr("fleet    off\n"));
  EXPECT_THAT(out,
              HasSubstr("   PART       THIS REQUEST      NEAREST STORED\n"));
  EXPECT_THAT(out, HasSubstr("   chain      c0ffee            (same)\n"));
  EXPECT_THAT(out,
              HasSubstr("*  toolchain  nvrtc-13.0/sm_80  nvrtc-13.0/sm_90\n"));
  EXPECT_THAT(out, HasSubstr("\nno artifact k80; differs in toolchain\n"));

  kfuse::v1::ExplainResponse cold;
  cold.set_key("k");
  auto* p = cold.add_parts();
  p->set_name("chain");
  p->set_value("c0ffee");
  EXPECT_THAT(FormatExplain(cold), HasSubstr("nearest  -\n"));
  EXPECT_THAT(FormatExplain(cold), HasSubstr("   chain  c0ffee        -\n"));
}

TEST(FormatImportResultTest, RejectedLinesThenCounts) {
  kfuse::v1::ImportKernelsResponse r;
  r.set_imported(3);
  r.set_already_present(1);
  r.add_rejected("artifact 0123456789abcdef: signature does not verify");
  EXPECT_EQ(FormatImportResult(r),
            "rejected artifact 0123456789abcdef: signature does not verify\n"
            "imported 3, already present 1, rejected 1\n");
  r.set_evicted(2);
  EXPECT_THAT(FormatImportResult(r), HasSubstr("imported 3, already present 1, rejected 1\n"
                                               "2 of the 3 imported were evicted again by the store's cap"));
}

}  // namespace
}  // namespace kfuse::client
