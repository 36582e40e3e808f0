// The C++ builder's composites, and every `kfuse chain` output, are chains
// the server accepts: they translate, validate and partition into one kernel
// (a row kernel for softmax and the norms, a matmul kernel with its epilogue
// for a linear layer) whose source the generator emits for the heuristic
// variant. Misshapen operands come back INVALID_ARGUMENT from the server's
// validator, naming the op.
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "clients/chain_builder.h"
#include "clients/cli.h"
#include "clients/json.h"
#include "codegen/canonicalize.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/translate.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
using namespace client;  // NOLINT: the builder's vocabulary reads better bare.

// Translates, canonicalizes and partitions `wire`; expects one kernel of
// `family` computing every output. With `emit`, the generator emits it for
// the family's heuristic variant.
void ExpectOneKernel(const v1::Chain& wire, Family family, bool emit = true) {
  absl::StatusOr<Chain> typed = TranslateChain(wire);
  ASSERT_TRUE(typed.ok()) << typed.status() << "\n" << ToJson(wire);
  Chain canonical = Canonicalize(*typed);
  absl::StatusOr<Partition> p = PartitionChain(canonical);
  ASSERT_TRUE(p.ok()) << p.status() << "\n" << ToString(canonical);
  ASSERT_EQ(p->kernels.size(), 1u) << ToString(canonical);
  const KernelGroup& g = p->kernels[0];
  EXPECT_EQ(g.family, family) << FamilyName(g.family) << ": " << g.reason;
  for (int32_t out : canonical.outputs) {
    EXPECT_THAT(g.results, ::testing::Contains(out)) << ToString(canonical);
  }
  if (!emit) return;
  absl::StatusOr<KernelSpec> spec =
      EmitFamily(canonical, g, FamilyHeuristic(canonical, g));
  EXPECT_TRUE(spec.ok()) << spec.status();
}

void ExpectOneRowKernel(const v1::Chain& wire) {
  ExpectOneKernel(wire, Family::kRowReduction);
}

struct Composite {
  const char* name;
  // Declares the inputs on `b`, names the outputs.
  std::function<void(ChainBuilder& b, v1::DType t, v1::Dim rows)> build;
};

std::vector<v1::Dim> RowShape(v1::Dim rows) { return {rows, StaticDim(4096)}; }

const std::vector<Composite>& Composites() {
  static const auto* composites = new std::vector<Composite>{
      {"softmax",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         b.Output("y", Softmax(b, b.Input("x", t, RowShape(rows))));
       }},
      {"softmax_scale_bias_mask",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         Value x = b.Input("x", t, RowShape(rows));
         SoftmaxOptions o;
         o.scale = 0.0883883476;
         o.bias = b.Input("bias", t, RowShape(rows));
         o.mask = b.Input("mask", v1::DTYPE_BOOL, RowShape(rows));
         b.Output("y", Softmax(b, x, o));
       }},
      {"softmax_row_mask",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         Value x = b.Input("x", t, RowShape(rows));
         SoftmaxOptions o;
         o.mask = b.Input("mask", v1::DTYPE_BOOL, {StaticDim(4096)});
         b.Output("y", Softmax(b, x, o));
       }},
      {"log_softmax",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         b.Output("y", LogSoftmax(b, b.Input("x", t, RowShape(rows))));
       }},
      {"layer_norm",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         Value x = b.Input("x", t, RowShape(rows));
         Value w = b.Input("weight", t, {StaticDim(4096)});
         Value bias = b.Input("bias", t, {StaticDim(4096)});
         b.Output("y", LayerNorm(b, x, w, bias));
       }},
      {"rms_norm",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         Value x = b.Input("x", t, RowShape(rows));
         Value w = b.Input("weight", t, {StaticDim(4096)});
         b.Output("y", RmsNorm(b, x, w));
       }},
      {"add_rms_norm",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         Value x = b.Input("x", t, RowShape(rows));
         Value r = b.Input("residual", t, RowShape(rows));
         Value w = b.Input("weight", t, {StaticDim(4096)});
         AddNorm y = AddRmsNorm(b, x, r, w);
         b.Output("sum", y.sum);
         b.Output("normed", y.normed);
       }},
      {"add_layer_norm",
       [](ChainBuilder& b, v1::DType t, v1::Dim rows) {
         Value x = b.Input("x", t, RowShape(rows));
         Value r = b.Input("residual", t, RowShape(rows));
         Value w = b.Input("weight", t, {StaticDim(4096)});
         Value bias = b.Input("bias", t, {StaticDim(4096)});
         AddNorm y = AddLayerNorm(b, x, r, w, bias);
         b.Output("sum", y.sum);
         b.Output("normed", y.normed);
       }},
  };
  return *composites;
}

TEST(ChainBuilderCrossTest, CompositesAreOneRowKernel) {
  for (const Composite& c : Composites()) {
    for (v1::DType t : {v1::DTYPE_BF16, v1::DTYPE_F32}) {
      for (const v1::Dim& rows : {SymbolDim("tokens", 8192), StaticDim(64)}) {
        SCOPED_TRACE(::testing::Message()
                     << c.name << " " << v1::DType_Name(t) << " rows "
                     << rows.ShortDebugString());
        ChainBuilder b;
        c.build(b, t, rows);
        absl::StatusOr<v1::Chain> wire = b.Build();
        ASSERT_TRUE(wire.ok()) << wire.status();
        ExpectOneRowKernel(*wire);
      }
    }
  }
}

// x [tokens, 4096] @ weight[11008, 4096]^T + bias, gelu_tanh: one matmul
// kernel with the bias and activation as its epilogue. The tensor-core path
// takes bf16 and f16; an f32 linear still partitions into one matmul kernel.
TEST(ChainBuilderCrossTest, LinearIsOneMatmulKernel) {
  for (v1::DType t : {v1::DTYPE_BF16, v1::DTYPE_F16, v1::DTYPE_F32}) {
    for (bool bias : {true, false}) {
      for (Activation act : {Activation::kGeluTanh, Activation::kNone,
                             Activation::kSilu, Activation::kGelu}) {
        for (const v1::Dim& rows :
             {SymbolDim("tokens", 16384), StaticDim(64)}) {
          SCOPED_TRACE(::testing::Message()
                       << v1::DType_Name(t) << " bias " << bias
                       << " activation " << static_cast<int>(act) << " rows "
                       << rows.ShortDebugString());
          ChainBuilder b;
          Value x = b.Input("x", t, RowShape(rows));
          Value w = b.Input("weight", t, {StaticDim(11008), StaticDim(4096)});
          std::optional<Value> bv;
          if (bias) bv = b.Input("bias", t, {StaticDim(11008)});
          b.Output("y", Linear(b, x, w, bv, act));
          absl::StatusOr<v1::Chain> wire = b.Build();
          ASSERT_TRUE(wire.ok()) << wire.status();
          ExpectOneKernel(*wire, Family::kMatmul, /*emit=*/t != v1::DTYPE_F32);
        }
      }
    }
  }
}

TEST(ChainBuilderCrossTest, LinearWeightOfOtherInFeaturesIsInvalid) {
  ChainBuilder b;
  Value x = b.Input("x", v1::DTYPE_BF16, RowShape(SymbolDim("tokens", 16384)));
  Value w =
      b.Input("weight", v1::DTYPE_BF16, {StaticDim(11008), StaticDim(4095)});
  Value bias = b.Input("bias", v1::DTYPE_BF16, {StaticDim(11008)});
  b.Output("y", Linear(b, x, w, bias, Activation::kGeluTanh));
  absl::StatusOr<v1::Chain> wire = b.Build();
  ASSERT_TRUE(wire.ok()) << wire.status();  // Shapes are the server's job.
  absl::StatusOr<Chain> typed = TranslateChain(*wire);
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().code(), absl::StatusCode::kInvalidArgument);
  // The weight's permute is op 0; the product is op 1.
  EXPECT_THAT(std::string(typed.status().message()),
              HasSubstr("op 1 (matmul)"));
  EXPECT_THAT(std::string(typed.status().message()),
              HasSubstr("inner dims differ"));
}

TEST(ChainBuilderCrossTest, MaskOfAnotherShapeIsInvalid) {
  ChainBuilder b;
  Value x = b.Input("x", v1::DTYPE_BF16, RowShape(SymbolDim("tokens", 8192)));
  SoftmaxOptions o;
  o.mask = b.Input("mask", v1::DTYPE_BOOL, {StaticDim(3), StaticDim(4095)});
  b.Output("y", Softmax(b, x, o));
  absl::StatusOr<v1::Chain> wire = b.Build();
  ASSERT_TRUE(wire.ok()) << wire.status();  // Shapes are the server's job.
  absl::StatusOr<Chain> typed = TranslateChain(*wire);
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().code(), absl::StatusCode::kInvalidArgument);
  // The where (op 1, after the -inf constant) is named.
  EXPECT_THAT(std::string(typed.status().message()), HasSubstr("op 1 (where)"));
  EXPECT_THAT(std::string(typed.status().message()),
              HasSubstr("do not broadcast"));
}

TEST(ChainBuilderCrossTest, NormWeightOfTheWrongLengthIsInvalid) {
  ChainBuilder b;
  Value x = b.Input("x", v1::DTYPE_BF16, RowShape(SymbolDim("tokens", 8192)));
  Value w = b.Input("weight", v1::DTYPE_BF16, {StaticDim(4095)});
  b.Output("y", RmsNorm(b, x, w, 1e-6));
  absl::StatusOr<v1::Chain> wire = b.Build();
  ASSERT_TRUE(wire.ok()) << wire.status();
  absl::StatusOr<Chain> typed = TranslateChain(*wire);
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().code(), absl::StatusCode::kInvalidArgument);
  // square, mean, +eps, rsqrt, x * rsqrt, then op 6: * weight.
  EXPECT_THAT(std::string(typed.status().message()), HasSubstr("op 6 (mul): args[1]"));
  EXPECT_THAT(std::string(typed.status().message()), HasSubstr("do not broadcast"));
}

// Every `kfuse chain` composite and flag combination, through the JSON the
// command prints: a row kernel for softmax and the norms, a matmul kernel for
// linear (generated for bf16 and f16 operands; f32 is only partitioned).
TEST(ChainBuilderCrossTest, CliChainsAreOneKernel) {
  struct Flags {
    const char* composite;
    bool mask, bias, no_weight, scale;
    const char* activation;
  };
  const Flags cases[] = {
      {"softmax", false, false, false, false, ""},
      {"softmax", true, true, false, true, ""},
      {"log_softmax", false, false, false, false, ""},
      {"layer_norm", false, false, false, false, ""},
      {"layer_norm", false, true, true, false, ""},
      {"rms_norm", false, false, false, false, ""},
      {"rms_norm", false, false, true, false, ""},
      {"add_rms_norm", false, false, false, false, ""},
      {"add_layer_norm", false, true, false, false, ""},
      {"linear", false, false, false, false, ""},
      {"linear", false, true, false, false, "gelu_tanh"},
      {"linear", false, true, false, false, "silu"},
      {"linear", false, false, false, false, "relu"},
  };
  for (const Flags& f : cases) {
    const bool linear = std::string(f.composite) == "linear";
    for (const char* dtype : {"f32", "bf16", "f16"}) {
      SCOPED_TRACE(::testing::Message()
                   << f.composite << " " << dtype << " mask " << f.mask
                   << " bias " << f.bias << " no_weight " << f.no_weight
                   << " activation " << f.activation);
      ChainOptions o;
      o.composite = f.composite;
      o.dtype = dtype;
      o.width = 4096;
      o.rows_symbol = "tokens";
      o.rows_hint = 8192;
      o.mask = f.mask;
      o.bias = f.bias;
      o.no_weight = f.no_weight;
      if (f.scale) o.scale = 0.125;
      o.activation = f.activation;
      if (linear) o.out_features = 11008;
      std::ostringstream out, err;
      CliIo io{out, err, false};
      ASSERT_EQ(RunChain(GlobalOptions(), o, io), kExitOk) << err.str();
      absl::StatusOr<v1::CompileRequest> req =
          ParseCompileRequest(out.str(), "kfuse chain");
      ASSERT_TRUE(req.ok()) << req.status();
      if (linear) {
        ExpectOneKernel(req->chain(), Family::kMatmul,
                        /*emit=*/std::string(dtype) != "f32");
      } else {
        ExpectOneRowKernel(req->chain());
      }
    }
  }
}

}  // namespace
}  // namespace kfuse
