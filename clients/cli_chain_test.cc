// `kfuse chain`: the JSON it prints parses back as a request with the
// composite's inputs, and bad flags are usage errors naming the flag.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "clients/cli.h"
#include "clients/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CliChainTest : public ::testing::Test {
 protected:
  ChainOptions Options(const char* composite) {
    ChainOptions o;
    o.composite = composite;
    o.dtype = "bf16";
    o.width = 4096;
    o.rows_symbol = "tokens";
    o.rows_hint = 16384;
    return o;
  }
  // Runs the command; the chain it printed.
  v1::Chain Run(const ChainOptions& o) {
    EXPECT_EQ(RunChain(g_, o, io_), kExitOk) << err_.str();
    absl::StatusOr<v1::CompileRequest> req =
        ParseCompileRequest(out_.str(), "stdout");
    EXPECT_TRUE(req.ok()) << req.status() << "\n" << out_.str();
    return req.ok() ? req->chain() : v1::Chain();
  }
  std::vector<std::string> InputNames(const v1::Chain& c) {
    std::vector<std::string> names;
    for (const auto& in : c.inputs()) names.push_back(in.name());
    return names;
  }
  std::vector<std::string> OutputNames(const v1::Chain& c) {
    std::vector<std::string> names;
    for (const auto& out : c.outputs()) names.push_back(out.name());
    return names;
  }

  std::ostringstream out_, err_;
  CliIo io_{out_, err_, false};
  GlobalOptions g_;
};

TEST_F(CliChainTest, AddRmsNormInputsAndShapes) {
  v1::Chain c = Run(Options("add_rms_norm"));
  EXPECT_THAT(InputNames(c), ElementsAre("x", "residual", "weight"));
  EXPECT_THAT(OutputNames(c), ElementsAre("sum", "normed"));
  for (const auto& in : c.inputs()) EXPECT_EQ(in.dtype(), v1::DTYPE_BF16);
  const v1::TensorSpec& x = c.inputs(0);
  ASSERT_EQ(x.shape_size(), 2);
  EXPECT_EQ(x.shape(0).symbol(), "tokens");
  EXPECT_EQ(x.shape(0).hint(), 16384);
  EXPECT_EQ(x.shape(1).size(), 4096);
  ASSERT_EQ(c.inputs(2).shape_size(), 1);
  EXPECT_EQ(c.inputs(2).shape(0).size(), 4096);
  // The default RMS eps.
  EXPECT_EQ(c.ops(3).kind(), v1::OP_CONSTANT);
  EXPECT_EQ(c.ops(3).value(), 1e-6);
}

TEST_F(CliChainTest, SoftmaxWithEveryOption) {
  ChainOptions o = Options("softmax");
  o.dtype = "f16";
  o.rows_symbol.clear();
  o.rows_hint.reset();
  o.rows = 128;
  o.scale = 0.125;
  o.mask = true;
  o.bias = true;
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("x", "bias", "mask"));
  EXPECT_EQ(c.inputs(1).dtype(), v1::DTYPE_F16);
  EXPECT_EQ(c.inputs(2).dtype(), v1::DTYPE_BOOL);
  for (const auto& in : c.inputs()) {
    ASSERT_EQ(in.shape_size(), 2);
    EXPECT_EQ(in.shape(0).size(), 128);
    EXPECT_EQ(in.shape(1).size(), 4096);
  }
  EXPECT_EQ(c.ops_size(), 10);
  EXPECT_EQ(c.ops(0).value(), 0.125);
  // -inf survives the JSON round trip.
  EXPECT_EQ(c.ops(3).value(), -HUGE_VAL);
  EXPECT_THAT(out_.str(), HasSubstr("-Infinity"));
  EXPECT_THAT(OutputNames(c), ElementsAre("y"));
}

TEST_F(CliChainTest, LayerNormFlags) {
  ChainOptions o = Options("layer_norm");
  o.dtype = "f32";
  o.no_weight = true;
  o.bias = true;
  o.eps = 1e-3;
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("x", "bias"));
  EXPECT_EQ(c.inputs(0).dtype(), v1::DTYPE_F32);
  EXPECT_EQ(c.ops(4).value(), 1e-3);
  EXPECT_EQ(c.ops(c.ops_size() - 1).kind(), v1::OP_ADD);
}

TEST_F(CliChainTest, DefaultsAreLayerNormEpsAndF32) {
  ChainOptions o = Options("add_layer_norm");
  o.dtype = ChainOptions().dtype;
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("x", "residual", "weight"));
  EXPECT_EQ(c.inputs(0).dtype(), v1::DTYPE_F32);
  EXPECT_EQ(c.ops(5).kind(), v1::OP_CONSTANT);
  EXPECT_EQ(c.ops(5).value(), 1e-5);
}

std::vector<v1::OpKind> Kinds(const v1::Chain& c) {
  std::vector<v1::OpKind> kinds;
  for (const auto& op : c.ops()) kinds.push_back(op.kind());
  return kinds;
}

TEST_F(CliChainTest, LinearBiasActivation) {
  ChainOptions o = Options("linear");
  o.out_features = 11008;
  o.bias = true;
  o.activation = "gelu_tanh";
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("x", "weight", "bias"));
  EXPECT_THAT(OutputNames(c), ElementsAre("y"));
  for (const auto& in : c.inputs()) EXPECT_EQ(in.dtype(), v1::DTYPE_BF16);
  // x [tokens, in], weight [out, in] as torch.nn.Linear keeps it, bias [out].
  const v1::TensorSpec& x = c.inputs(0);
  ASSERT_EQ(x.shape_size(), 2);
  EXPECT_EQ(x.shape(0).symbol(), "tokens");
  EXPECT_EQ(x.shape(0).hint(), 16384);
  EXPECT_EQ(x.shape(1).size(), 4096);
  const v1::TensorSpec& w = c.inputs(1);
  ASSERT_EQ(w.shape_size(), 2);
  EXPECT_EQ(w.shape(0).size(), 11008);
  EXPECT_EQ(w.shape(1).size(), 4096);
  ASSERT_EQ(c.inputs(2).shape_size(), 1);
  EXPECT_EQ(c.inputs(2).shape(0).size(), 11008);
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_ADD,
                                    v1::OP_GELU_TANH));
  EXPECT_THAT(c.ops(0).permute().perm(), ElementsAre(1, 0));
  EXPECT_EQ(c.ops(0).args(0).input(), 1u);  // The weight, transposed.
  EXPECT_EQ(c.ops(1).args(0).input(), 0u);  // x @ it.
  EXPECT_EQ(c.ops(1).args(1).op(), 0u);
  EXPECT_EQ(c.ops(2).args(1).input(), 2u);  // + bias.
  EXPECT_EQ(c.outputs(0).value().op(), 3u);
}

TEST_F(CliChainTest, LinearDefaultsToNoBiasNoActivation) {
  ChainOptions o = Options("linear");
  o.dtype = "f16";
  o.rows_symbol.clear();
  o.rows_hint.reset();
  o.rows = 16;
  o.width = 512;
  o.out_features = 256;
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("x", "weight"));
  EXPECT_EQ(c.inputs(0).shape(0).size(), 16);
  EXPECT_EQ(c.inputs(1).dtype(), v1::DTYPE_F16);
  EXPECT_EQ(c.inputs(1).shape(0).size(), 256);
  EXPECT_EQ(c.inputs(1).shape(1).size(), 512);
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL));
}

TEST_F(CliChainTest, LinearActivationNames) {
  const std::pair<const char*, v1::OpKind> cases[] = {
      {"relu", v1::OP_RELU},        {"silu", v1::OP_SILU},
      {"gelu", v1::OP_GELU_ERF},    {"gelu_tanh", v1::OP_GELU_TANH},
      {"sigmoid", v1::OP_SIGMOID},  {"tanh", v1::OP_TANH},
      {"none", v1::OP_UNSPECIFIED},
  };
  for (const auto& [name, kind] : cases) {
    SCOPED_TRACE(name);
    out_.str("");
    ChainOptions o = Options("linear");
    o.out_features = 1024;
    o.activation = name;
    v1::Chain c = Run(o);
    if (kind == v1::OP_UNSPECIFIED) {
      EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL));
    } else {
      EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, kind));
    }
  }
}

TEST_F(CliChainTest, JsonFlagPrintsOneLine) {
  g_.json = true;
  ASSERT_EQ(RunChain(g_, Options("log_softmax"), io_), kExitOk);
  const std::string text = out_.str();
  EXPECT_EQ(text.find('\n'), text.size() - 1);
}

TEST_F(CliChainTest, WritesTheFile) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("kfuse_cli_chain_test_" + std::to_string(::getpid()) + ".json");
  ChainOptions o = Options("rms_norm");
  o.out = path.string();
  ASSERT_EQ(RunChain(g_, o, io_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "wrote " + o.out + "\n");
  absl::StatusOr<v1::CompileRequest> req = LoadCompileRequest(o.out);
  std::filesystem::remove(path);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_THAT(InputNames(req->chain()), ElementsAre("x", "weight"));
}

// A valid attention command line over Options()'s row flags.
void AttentionFlags(ChainOptions& o) {
  o.composite = "attention";
  o.width.reset();
  o.rows_symbol.clear();
  o.rows_hint.reset();
  o.heads = 8;
  o.seq = 128;
  o.head_dim = 64;
}

std::vector<std::string> DimsOf(
    const google::protobuf::RepeatedPtrField<v1::Dim>& dims) {
  std::vector<std::string> out;
  for (const v1::Dim& d : dims) {
    out.push_back(d.kind_case() == v1::Dim::kSize ? std::to_string(d.size())
                                                  : d.symbol());
  }
  return out;
}

TEST_F(CliChainTest, AttentionCausal) {
  ChainOptions o = Options("softmax");
  AttentionFlags(o);
  o.seq = 1024;
  o.causal = true;
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("q", "k", "v"));
  EXPECT_THAT(OutputNames(c), ElementsAre("out"));
  for (const auto& in : c.inputs()) {
    EXPECT_EQ(in.dtype(), v1::DTYPE_BF16);
    EXPECT_THAT(DimsOf(in.shape()), ElementsAre("1", "8", "1024", "64"));
  }
  EXPECT_THAT(
      Kinds(c),
      ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT, v1::OP_MUL,
                  v1::OP_IOTA, v1::OP_IOTA, v1::OP_LE, v1::OP_CONSTANT,
                  v1::OP_WHERE, v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                  v1::OP_REDUCE_SUM, v1::OP_DIV, v1::OP_MATMUL));
  EXPECT_EQ(c.ops(2).value(), 0.125);
  EXPECT_EQ(c.ops(7).value(), -HUGE_VAL);  // Survives the JSON round trip.
  EXPECT_THAT(DimsOf(c.ops(4).shape().shape()),
              ElementsAre("1", "8", "1024", "1024"));
  EXPECT_EQ(c.outputs(0).value().op(), 14u);
}

TEST_F(CliChainTest, AttentionGroupedQueriesWithLse) {
  ChainOptions o = Options("softmax");
  AttentionFlags(o);
  o.kv_heads = 2;
  o.seq = 512;
  o.head_dim = 128;
  o.lse = true;
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("q", "k", "v"));
  EXPECT_THAT(OutputNames(c), ElementsAre("out", "lse"));
  EXPECT_THAT(DimsOf(c.inputs(0).shape()), ElementsAre("1", "8", "512", "128"));
  EXPECT_THAT(DimsOf(c.inputs(1).shape()), ElementsAre("1", "2", "512", "128"));
  EXPECT_THAT(DimsOf(c.inputs(2).shape()), ElementsAre("1", "2", "512", "128"));
  ASSERT_EQ(c.ops_size(), 18);
  EXPECT_THAT(DimsOf(c.ops(0).shape().shape()),
              ElementsAre("1", "2", "4", "512", "128"));
  EXPECT_THAT(DimsOf(c.ops(1).shape().shape()),
              ElementsAre("1", "2", "1", "512", "128"));
  EXPECT_EQ(c.ops(5).value(), 1 / std::sqrt(128.0));
  EXPECT_EQ(c.ops(13).kind(), v1::OP_RESHAPE);
  EXPECT_THAT(DimsOf(c.ops(13).shape().shape()),
              ElementsAre("1", "8", "512", "128"));
  EXPECT_EQ(c.ops(16).kind(), v1::OP_CAST);
  EXPECT_EQ(c.ops(16).dtype(), v1::DTYPE_F32);
  EXPECT_THAT(DimsOf(c.ops(17).shape().shape()), ElementsAre("1", "8", "512"));
  EXPECT_EQ(c.outputs(0).value().op(), 13u);
  EXPECT_EQ(c.outputs(1).value().op(), 17u);
}

TEST_F(CliChainTest, AttentionEveryOption) {
  ChainOptions o = Options("softmax");
  AttentionFlags(o);
  o.dtype = "f16";
  o.batch = 4;
  o.seq.reset();
  o.seq_symbol = "ctx";
  o.seq_hint = 2048;
  o.seq_q = 1;  // Decoding: one query against the cached keys.
  o.value_dim = 32;
  o.scale = 0.2;
  o.bias = true;
  o.mask = true;
  o.lengths = true;
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c),
              ElementsAre("q", "k", "v", "bias", "mask", "lengths"));
  EXPECT_THAT(DimsOf(c.inputs(0).shape()), ElementsAre("4", "8", "1", "64"));
  EXPECT_THAT(DimsOf(c.inputs(1).shape()), ElementsAre("4", "8", "ctx", "64"));
  EXPECT_EQ(c.inputs(1).shape(2).hint(), 2048);
  EXPECT_THAT(DimsOf(c.inputs(2).shape()), ElementsAre("4", "8", "ctx", "32"));
  EXPECT_THAT(DimsOf(c.inputs(3).shape()), ElementsAre("4", "8", "1", "ctx"));
  EXPECT_EQ(c.inputs(3).dtype(), v1::DTYPE_F16);
  EXPECT_EQ(c.inputs(4).dtype(), v1::DTYPE_BOOL);
  EXPECT_THAT(DimsOf(c.inputs(5).shape()), ElementsAre("4"));
  EXPECT_EQ(c.inputs(5).dtype(), v1::DTYPE_I32);
  EXPECT_THAT(
      Kinds(c),
      ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT, v1::OP_MUL,
                  v1::OP_ADD, v1::OP_IOTA, v1::OP_RESHAPE, v1::OP_LT,
                  v1::OP_LOGICAL_AND, v1::OP_CONSTANT, v1::OP_WHERE,
                  v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP, v1::OP_REDUCE_SUM,
                  v1::OP_DIV, v1::OP_CONSTANT, v1::OP_EQ, v1::OP_CONSTANT,
                  v1::OP_WHERE, v1::OP_MATMUL));
  EXPECT_EQ(c.ops(2).value(), 0.2);
  // The length mask is and-ed with the input mask: args (mask, col < len).
  EXPECT_EQ(c.ops(8).args(0).input(), 4u);
  EXPECT_EQ(c.ops(8).args(1).op(), 7u);
  EXPECT_THAT(DimsOf(c.ops(6).shape().shape()),
              ElementsAre("4", "1", "1", "1"));
  EXPECT_THAT(OutputNames(c), ElementsAre("out"));
}

TEST_F(CliChainTest, AttentionPerSideSequences) {
  ChainOptions o = Options("softmax");
  AttentionFlags(o);
  o.seq.reset();
  o.seq_q = 16;
  o.seq_k = 48;
  v1::Chain c = Run(o);
  EXPECT_THAT(DimsOf(c.inputs(0).shape()), ElementsAre("1", "8", "16", "64"));
  EXPECT_THAT(DimsOf(c.inputs(1).shape()), ElementsAre("1", "8", "48", "64"));
}

// A class loss: logits (or log-probabilities) and i64 labels in, "loss"
// out; the label picks its logit through an iota along the row.
TEST_F(CliChainTest, CrossEntropyAndNllLoss) {
  ChainOptions o = Options("cross_entropy");
  v1::Chain c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("x", "labels"));
  EXPECT_THAT(OutputNames(c), ElementsAre("loss"));
  EXPECT_EQ(c.inputs(1).dtype(), v1::DTYPE_I64);
  EXPECT_EQ(c.inputs(1).shape(0).symbol(), "tokens");
  EXPECT_EQ(c.ops(0).kind(), v1::OP_CAST);
  // The mean over the rows kept, cast back to bf16.
  EXPECT_EQ(c.ops(c.ops_size() - 2).kind(), v1::OP_DIV);
  EXPECT_EQ(c.ops(c.ops_size() - 1).dtype(), v1::DTYPE_BF16);

  out_.str("");
  o = Options("nll_loss");
  o.labels_dtype = "i32";
  o.reduction = "none";
  o.ignore_index = 0;
  c = Run(o);
  EXPECT_THAT(InputNames(c), ElementsAre("logp", "labels"));
  EXPECT_EQ(c.inputs(1).dtype(), v1::DTYPE_I32);
  EXPECT_EQ(c.ops(0).kind(), v1::OP_RESHAPE);  // No cast of i32 labels.
  EXPECT_EQ(c.ops(c.ops_size() - 1).kind(), v1::OP_WHERE);
  bool ignores_zero = false;
  for (const v1::Op& op : c.ops()) {
    ignores_zero |= op.kind() == v1::OP_NE && c.ops(op.args(1).op()).value() == 0;
  }
  EXPECT_TRUE(ignores_zero);
}

struct BadFlags {
  const char* name;
  void (*edit)(ChainOptions& o);
  const char* message;
};

class CliChainErrorTest : public CliChainTest,
                          public ::testing::WithParamInterface<BadFlags> {};

TEST_P(CliChainErrorTest, UsageErrorNamesTheFlag) {
  ChainOptions o = Options("softmax");
  GetParam().edit(o);
  EXPECT_EQ(RunChain(g_, o, io_), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(err_.str(), HasSubstr(GetParam().message));
  EXPECT_EQ(out_.str(), "");
}

INSTANTIATE_TEST_SUITE_P(
    Flags, CliChainErrorTest,
    ::testing::Values(
        BadFlags{"UnknownComposite",
                 [](ChainOptions& o) { o.composite = "gelu"; },
                 "composite 'gelu': expected one of softmax"},
        BadFlags{"Dtype", [](ChainOptions& o) { o.dtype = "i32"; },
                 "--dtype i32"},
        BadFlags{"Width", [](ChainOptions& o) { o.width = 0; }, "--width 0"},
        BadFlags{"NoRows", [](ChainOptions& o) { o.rows_symbol.clear(); },
                 "exactly one"},
        BadFlags{"BothRows", [](ChainOptions& o) { o.rows = 8; },
                 "exactly one"},
        BadFlags{"ZeroRows",
                 [](ChainOptions& o) {
                   o.rows_symbol.clear();
                   o.rows_hint.reset();
                   o.rows = 0;
                 },
                 "--rows 0"},
        BadFlags{"HintWithStaticRows",
                 [](ChainOptions& o) {
                   o.rows_symbol.clear();
                   o.rows = 8;
                 },
                 "--rows-hint goes with --rows-symbol"},
        BadFlags{"NegativeHint", [](ChainOptions& o) { o.rows_hint = -1; },
                 "--rows-hint -1"},
        BadFlags{"EpsOnSoftmax", [](ChainOptions& o) { o.eps = 1e-5; },
                 "--eps: applies to the norms, not softmax"},
        BadFlags{"NoWeightOnSoftmax",
                 [](ChainOptions& o) { o.no_weight = true; },
                 "--no-weight: applies to the norms"},
        BadFlags{"MaskOnNorm",
                 [](ChainOptions& o) {
                   o.composite = "rms_norm";
                   o.mask = true;
                 },
                 "--mask: applies to softmax and attention, not rms_norm"},
        BadFlags{"ScaleOnLogSoftmax",
                 [](ChainOptions& o) {
                   o.composite = "log_softmax";
                   o.scale = 2;
                 },
                 "--scale: applies to softmax and attention, not log_softmax"},
        BadFlags{"BiasOnRmsNorm",
                 [](ChainOptions& o) {
                   o.composite = "add_rms_norm";
                   o.bias = true;
                 },
                 "--bias: applies to softmax, layer_norm, add_layer_norm, "
                 "linear and attention, not add_rms_norm"},
        BadFlags{"NegativeEps",
                 [](ChainOptions& o) {
                   o.composite = "layer_norm";
                   o.eps = -1;
                 },
                 "--eps -1: must be finite and >= 0"},
        BadFlags{"InfiniteEps",
                 [](ChainOptions& o) {
                   o.composite = "rms_norm";
                   o.eps = HUGE_VAL;
                 },
                 "--eps inf: must be finite and >= 0"},
        BadFlags{"NanScaleOnSoftmax",
                 [](ChainOptions& o) { o.scale = std::nan(""); },
                 "--scale nan: must be finite"},
        BadFlags{"ReductionOnSoftmax",
                 [](ChainOptions& o) { o.reduction = "sum"; },
                 "--reduction: applies to cross_entropy and nll_loss, not "
                 "softmax"},
        BadFlags{"IgnoreIndexOnNorm",
                 [](ChainOptions& o) {
                   o.composite = "rms_norm";
                   o.ignore_index = 0;
                 },
                 "--ignore-index: applies to cross_entropy and nll_loss"},
        BadFlags{"EpsOnCrossEntropy",
                 [](ChainOptions& o) {
                   o.composite = "cross_entropy";
                   o.eps = 1e-5;
                 },
                 "--eps: applies to the norms, not cross_entropy"},
        BadFlags{"UnknownReduction",
                 [](ChainOptions& o) {
                   o.composite = "nll_loss";
                   o.reduction = "average";
                 },
                 "--reduction average: expected none, sum or mean"},
        BadFlags{"LabelsDtype",
                 [](ChainOptions& o) {
                   o.composite = "cross_entropy";
                   o.labels_dtype = "f32";
                 },
                 "--labels-dtype f32: expected i32 or i64"},
        BadFlags{"UnknownCompositeListsLinear",
                 [](ChainOptions& o) { o.composite = "mlp"; },
                 "add_layer_norm, linear"},
        BadFlags{"LinearWithoutOutFeatures",
                 [](ChainOptions& o) { o.composite = "linear"; },
                 "--out-features: required by linear"},
        BadFlags{"ZeroOutFeatures",
                 [](ChainOptions& o) {
                   o.composite = "linear";
                   o.out_features = 0;
                 },
                 "--out-features 0: must be >= 1"},
        BadFlags{"LinearZeroWidth",
                 [](ChainOptions& o) {
                   o.composite = "linear";
                   o.out_features = 8;
                   o.width = 0;
                 },
                 "--width 0"},
        BadFlags{"UnknownActivation",
                 [](ChainOptions& o) {
                   o.composite = "linear";
                   o.out_features = 8;
                   o.activation = "swish";
                 },
                 "--activation swish: expected none, relu, silu, gelu, "
                 "gelu_tanh, sigmoid or tanh"},
        BadFlags{"ActivationOnSoftmax",
                 [](ChainOptions& o) { o.activation = "relu"; },
                 "--activation: applies to linear, not softmax"},
        BadFlags{"OutFeaturesOnNorm",
                 [](ChainOptions& o) {
                   o.composite = "rms_norm";
                   o.out_features = 8;
                 },
                 "--out-features: applies to linear, not rms_norm"},
        BadFlags{"EpsOnLinear",
                 [](ChainOptions& o) {
                   o.composite = "linear";
                   o.out_features = 8;
                   o.eps = 1e-5;
                 },
                 "--eps: applies to the norms, not linear"},
        BadFlags{"NoWeightOnLinear",
                 [](ChainOptions& o) {
                   o.composite = "linear";
                   o.out_features = 8;
                   o.no_weight = true;
                 },
                 "--no-weight: applies to the norms, not linear"},
        BadFlags{"MaskOnLinear",
                 [](ChainOptions& o) {
                   o.composite = "linear";
                   o.out_features = 8;
                   o.mask = true;
                 },
                 "--mask: applies to softmax and attention, not linear"},
        BadFlags{"UnknownCompositeListsAttention",
                 [](ChainOptions& o) { o.composite = "sdpa"; },
                 "linear, attention"},
        BadFlags{"AttentionWithoutHeads",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.heads.reset();
                 },
                 "--heads: required by attention"},
        BadFlags{"AttentionWithoutHeadDim",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.head_dim.reset();
                 },
                 "--head-dim: required by attention"},
        BadFlags{"AttentionZeroHeads",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.heads = 0;
                 },
                 "--heads 0: must be >= 1"},
        BadFlags{"AttentionZeroBatch",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.batch = 0;
                 },
                 "--batch 0: must be >= 1"},
        BadFlags{"AttentionNegativeValueDim",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.value_dim = -64;
                 },
                 "--value-dim -64: must be >= 1"},
        BadFlags{"KvHeadsDoNotDivide",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.kv_heads = 3;
                 },
                 "--kv-heads 3: must divide --heads 8"},
        BadFlags{"AttentionF32",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.dtype = "f32";
                 },
                 "--dtype f32 (the default): attention takes bf16 or f16 (--dtype bf16)"},
        BadFlags{"AttentionWithoutSeq",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.seq.reset();
                 },
                 "--seq-q: required by attention (or --seq N"},
        BadFlags{"AttentionWithoutSeqK",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.seq.reset();
                   o.seq_q = 1;
                 },
                 "--seq-k: required by attention"},
        BadFlags{"SeqAndSeqSymbol",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.seq_symbol = "S";
                 },
                 "--seq N (static) or --seq-symbol NAME (runtime): not both"},
        BadFlags{"SeqSymbolBesideBothSeqs",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.seq.reset();
                   o.seq_symbol = "S";
                   o.seq_q = 8;
                   o.seq_k = 8;
                 },
                 "--seq-symbol: unused, as --seq-q and --seq-k set both sequences"},
        BadFlags{"SeqHintWithoutSymbol",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.seq_hint = 64;
                 },
                 "--seq-hint goes with --seq-symbol"},
        BadFlags{"NegativeSeqHint",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.seq.reset();
                   o.seq_symbol = "S";
                   o.seq_hint = -1;
                 },
                 "--seq-hint -1: must be >= 0"},
        BadFlags{"ZeroSeqK",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.seq_k = 0;
                 },
                 "--seq-k 0: must be >= 1"},
        BadFlags{"AttentionScaleNotFinite",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.scale = HUGE_VAL;
                 },
                 "--scale inf: must be finite"},
        BadFlags{"WidthOnAttention",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.width = 4096;
                 },
                 "--width: applies to the row composites, not attention"},
        BadFlags{"RowsOnAttention",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.rows = 8;
                 },
                 "--rows: applies to the row composites, not attention"},
        BadFlags{"RowsSymbolOnAttention",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.rows_symbol = "tokens";
                 },
                 "--rows-symbol: applies to the row composites"},
        BadFlags{"EpsOnAttention",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.eps = 1e-5;
                 },
                 "--eps: applies to the norms, not attention"},
        BadFlags{"HeadsOnSoftmax", [](ChainOptions& o) { o.heads = 8; },
                 "--heads: applies to attention, not softmax"},
        BadFlags{"CausalOnLinear",
                 [](ChainOptions& o) {
                   o.composite = "linear";
                   o.out_features = 8;
                   o.causal = true;
                 },
                 "--causal: applies to attention, not linear"},
        BadFlags{"LseOnRmsNorm",
                 [](ChainOptions& o) {
                   o.composite = "rms_norm";
                   o.lse = true;
                 },
                 "--lse: applies to attention, not rms_norm"},
        BadFlags{"SeqSymbolOnSoftmax",
                 [](ChainOptions& o) { o.seq_symbol = "S"; },
                 "--seq-symbol: applies to attention, not softmax"},
        BadFlags{"IgnoreIndexPastI32",
                 [](ChainOptions& o) {
                   o.composite = "cross_entropy";
                   o.ignore_index = int64_t{3000000000};
                 },
                 "--ignore-index 3000000000: outside i32"},
        // A flag the composite does not take is refused whatever its value,
        // 0 included (it once read as not given).
        BadFlags{"ZeroSeqHintOnSoftmax",
                 [](ChainOptions& o) { o.seq_hint = 0; },
                 "--seq-hint: applies to attention, not softmax"},
        BadFlags{"ZeroWidthOnAttention",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.width = 0;
                 },
                 "--width: applies to the row composites"},
        BadFlags{"ZeroRowsHintOnAttention",
                 [](ChainOptions& o) {
                   AttentionFlags(o);
                   o.rows_hint = 0;
                 },
                 "--rows-hint: applies to the row composites"},
        BadFlags{"ZeroRowsHintWithStaticRows",
                 [](ChainOptions& o) {
                   o.rows_symbol.clear();
                   o.rows = 8;
                   o.rows_hint = 0;
                 },
                 "--rows-hint goes with --rows-symbol"}),
    [](const ::testing::TestParamInfo<BadFlags>& info) {
      return std::string(info.param.name);
    });

}  // namespace
}  // namespace kfuse::client
