// `kfuse chain`: writes the chain JSON of a composite (softmax, the norms, a
// linear layer, the class losses for a row shape; attention for its heads and
// sequences), built locally with the ChainBuilder; no server involved.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/chain_builder.h"
#include "clients/cli.h"
#include "clients/json.h"
#include "core/status.h"

namespace kfuse::client {
namespace {

enum class Composite {
  kSoftmax,
  kLogSoftmax,
  kLayerNorm,
  kRmsNorm,
  kAddRmsNorm,
  kAddLayerNorm,
  kLinear,
  kAttention,
  kCrossEntropy,
  kNllLoss,
};

constexpr char kComposites[] =
    "softmax, log_softmax, layer_norm, rms_norm, add_rms_norm, add_layer_norm, "
    "linear, attention, cross_entropy, nll_loss";

absl::StatusOr<Composite> ParseComposite(const std::string& name) {
  const std::pair<const char*, Composite> kNames[] = {
      {"softmax", Composite::kSoftmax},
      {"log_softmax", Composite::kLogSoftmax},
      {"layer_norm", Composite::kLayerNorm},
      {"rms_norm", Composite::kRmsNorm},
      {"add_rms_norm", Composite::kAddRmsNorm},
      {"add_layer_norm", Composite::kAddLayerNorm},
      {"linear", Composite::kLinear},
      {"attention", Composite::kAttention},
      {"cross_entropy", Composite::kCrossEntropy},
      {"nll_loss", Composite::kNllLoss},
  };
  for (const auto& [n, c] : kNames) {
    if (name == n) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("composite '", name, "': expected one of ", kComposites));
}

absl::StatusOr<Activation> ParseActivation(const std::string& name) {
  const std::pair<const char*, Activation> kNames[] = {
      {"none", Activation::kNone},          {"relu", Activation::kRelu},
      {"silu", Activation::kSilu},          {"gelu", Activation::kGelu},
      {"gelu_tanh", Activation::kGeluTanh}, {"sigmoid", Activation::kSigmoid},
      {"tanh", Activation::kTanh},
  };
  if (name.empty()) return Activation::kNone;
  for (const auto& [n, a] : kNames) {
    if (name == n) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--activation ", name,
                   ": expected none, relu, silu, gelu, gelu_tanh, sigmoid or "
                   "tanh"));
}

absl::StatusOr<v1::DType> ParseFloatDType(const std::string& name) {
  if (name == "f32") return v1::DTYPE_F32;
  if (name == "bf16") return v1::DTYPE_BF16;
  if (name == "f16") return v1::DTYPE_F16;
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype ", name, ": expected f32, bf16 or f16"));
}

absl::StatusOr<v1::Dim> RowsDim(const ChainOptions& o) {
  if (o.rows.has_value() == !o.rows_symbol.empty()) {
    return absl::InvalidArgumentError(
        "--rows N (static) or --rows-symbol NAME (runtime): exactly one");
  }
  if (o.rows.has_value()) {
    if (*o.rows < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rows ", *o.rows, ": must be >= 1"));
    }
    if (o.rows_hint.has_value()) {
      return absl::InvalidArgumentError(
          "--rows-hint goes with --rows-symbol, not --rows");
    }
    return StaticDim(*o.rows);
  }
  if (o.rows_hint.value_or(0) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rows-hint ", *o.rows_hint, ": must be >= 0"));
  }
  return SymbolDim(o.rows_symbol, o.rows_hint.value_or(0));
}

// Refuses flags the composite would ignore, naming them.
absl::Status CheckFlags(Composite c, const ChainOptions& o) {
  const bool softmax = c == Composite::kSoftmax;
  const bool linear = c == Composite::kLinear;
  const bool attention = c == Composite::kAttention;
  const bool loss = c == Composite::kCrossEntropy || c == Composite::kNllLoss;
  const bool norm = !softmax && !linear && !attention && !loss &&
                    c != Composite::kLogSoftmax;
  const bool layer =
      c == Composite::kLayerNorm || c == Composite::kAddLayerNorm;
  auto refuse = [&](const char* flag, const char* which) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": applies to ", which, ", not ", o.composite));
  };
  if (o.scale.has_value() && !softmax && !attention) {
    return refuse("--scale", "softmax and attention");
  }
  if (o.mask && !softmax && !attention) {
    return refuse("--mask", "softmax and attention");
  }
  if (o.bias && !softmax && !layer && !linear && !attention) {
    return refuse("--bias",
                  "softmax, layer_norm, add_layer_norm, linear and attention");
  }
  if (attention) {
    if (o.width.has_value()) return refuse("--width", "the row composites");
    if (o.rows.has_value()) return refuse("--rows", "the row composites");
    if (!o.rows_symbol.empty()) {
      return refuse("--rows-symbol", "the row composites");
    }
    if (o.rows_hint.has_value()) {
      return refuse("--rows-hint", "the row composites");
    }
  } else {
    const std::pair<bool, const char*> attention_flags[] = {
        {o.batch.has_value(), "--batch"},
        {o.heads.has_value(), "--heads"},
        {o.kv_heads.has_value(), "--kv-heads"},
        {o.seq.has_value(), "--seq"},
        {!o.seq_symbol.empty(), "--seq-symbol"},
        {o.seq_hint.has_value(), "--seq-hint"},
        {o.seq_q.has_value(), "--seq-q"},
        {o.seq_k.has_value(), "--seq-k"},
        {o.head_dim.has_value(), "--head-dim"},
        {o.value_dim.has_value(), "--value-dim"},
        {o.causal, "--causal"},
        {o.lengths, "--lengths"},
        {o.lse, "--lse"},
    };
    for (const auto& [given, flag] : attention_flags) {
      if (given) return refuse(flag, "attention");
    }
  }
  if (!loss) {
    const std::pair<bool, const char*> loss_flags[] = {
        {!o.labels_dtype.empty(), "--labels-dtype"},
        {o.ignore_index.has_value(), "--ignore-index"},
        {!o.reduction.empty(), "--reduction"},
    };
    for (const auto& [given, flag] : loss_flags) {
      if (given) return refuse(flag, "cross_entropy and nll_loss");
    }
  }
  if (o.eps.has_value() && !norm) return refuse("--eps", "the norms");
  if (o.no_weight && !norm) return refuse("--no-weight", "the norms");
  if (o.out_features.has_value() && !linear) {
    return refuse("--out-features", "linear");
  }
  if (!o.activation.empty() && !linear) return refuse("--activation", "linear");
  if (linear && !o.out_features.has_value()) {
    return absl::InvalidArgumentError(
        "--out-features: required by linear (the weight is [out, width])");
  }
  if (o.out_features.has_value() && *o.out_features < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out-features ", *o.out_features, ": must be >= 1"));
  }
  if (o.eps.has_value() && !(*o.eps >= 0 && std::isfinite(*o.eps))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eps ", *o.eps, ": must be finite and >= 0"));
  }
  // A non-finite scale makes every output NaN or infinite.
  if (o.scale.has_value() && !std::isfinite(*o.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--scale ", *o.scale, ": must be finite"));
  }
  return absl::OkStatus();
}

absl::Status CheckAtLeastOne(const std::optional<int64_t>& n,
                             const char* flag) {
  if (!n.has_value() || *n >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", *n, ": must be >= 1"));
}

// The two sequence dims: --seq-q / --seq-k over --seq or --seq-symbol.
absl::StatusOr<std::pair<v1::Dim, v1::Dim>> SequenceDims(
    const ChainOptions& o) {
  if (o.seq.has_value() && !o.seq_symbol.empty()) {
    return absl::InvalidArgumentError(
        "--seq N (static) or --seq-symbol NAME (runtime): not both");
  }
  if (o.seq_hint.has_value() && o.seq_symbol.empty()) {
    return absl::InvalidArgumentError("--seq-hint goes with --seq-symbol");
  }
  if (o.seq_hint.value_or(0) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seq-hint ", *o.seq_hint, ": must be >= 0"));
  }
  if (o.seq_q.has_value() && o.seq_k.has_value() && (o.seq.has_value() || !o.seq_symbol.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(o.seq.has_value() ? "--seq" : "--seq-symbol",
                                                   ": unused, as --seq-q and --seq-k set both sequences"));
  }
  KFUSE_RETURN_IF_ERROR(CheckAtLeastOne(o.seq, "--seq"));
  KFUSE_RETURN_IF_ERROR(CheckAtLeastOne(o.seq_q, "--seq-q"));
  KFUSE_RETURN_IF_ERROR(CheckAtLeastOne(o.seq_k, "--seq-k"));
  std::optional<v1::Dim> both;
  if (o.seq.has_value()) both = StaticDim(*o.seq);
  if (!o.seq_symbol.empty()) {
    both = SymbolDim(o.seq_symbol, o.seq_hint.value_or(0));
  }
  auto side = [&](const std::optional<int64_t>& n,
                  const char* flag) -> absl::StatusOr<v1::Dim> {
    if (n.has_value()) return StaticDim(*n);
    if (both.has_value()) return *both;
    return absl::InvalidArgumentError(
        absl::StrCat(flag,
                     ": required by attention (or --seq N, or "
                     "--seq-symbol NAME, for both sequences)"));
  };
  KFUSE_ASSIGN_OR_RETURN(v1::Dim seq_q, side(o.seq_q, "--seq-q"));
  KFUSE_ASSIGN_OR_RETURN(v1::Dim seq_k, side(o.seq_k, "--seq-k"));
  return std::make_pair(std::move(seq_q), std::move(seq_k));
}

// q, k, v [and bias, mask, lengths] in; "out" [and "lse"] out.
absl::StatusOr<v1::Chain> AttentionChain(const ChainOptions& o) {
  if (o.dtype != "bf16" && o.dtype != "f16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype ", o.dtype, o.dtype == "f32" ? " (the default)" : "",
                     ": attention takes bf16 or f16 (--dtype bf16)"));
  }
  KFUSE_ASSIGN_OR_RETURN(v1::DType dtype, ParseFloatDType(o.dtype));
  if (!o.heads.has_value()) {
    return absl::InvalidArgumentError("--heads: required by attention");
  }
  if (!o.head_dim.has_value()) {
    return absl::InvalidArgumentError("--head-dim: required by attention");
  }
  const std::pair<const std::optional<int64_t>*, const char*> sizes[] = {
      {&o.batch, "--batch"},         {&o.heads, "--heads"},
      {&o.kv_heads, "--kv-heads"},   {&o.head_dim, "--head-dim"},
      {&o.value_dim, "--value-dim"},
  };
  for (const auto& [n, flag] : sizes) {
    KFUSE_RETURN_IF_ERROR(CheckAtLeastOne(*n, flag));
  }
  const int64_t heads = *o.heads;
  const int64_t kv_heads = o.kv_heads.value_or(heads);
  if (heads % kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-heads ", kv_heads, ": must divide --heads ", heads));
  }
  KFUSE_ASSIGN_OR_RETURN(auto seqs, SequenceDims(o));
  const auto& [seq_q, seq_k] = seqs;
  const v1::Dim batch = StaticDim(o.batch.value_or(1));
  const int64_t head_dim = *o.head_dim;
  const int64_t value_dim = o.value_dim.value_or(head_dim);
  const std::vector<v1::Dim> scores = {batch, StaticDim(heads), seq_q, seq_k};

  ChainBuilder b;
  AttentionOptions ao;
  ao.batch = {batch};
  ao.heads = heads;
  ao.kv_heads = o.kv_heads;
  ao.seq_q = seq_q;
  ao.seq_k = seq_k;
  ao.head_dim = head_dim;
  ao.value_dim = o.value_dim;
  ao.causal = o.causal;
  ao.scale = o.scale;
  ao.return_lse = o.lse;
  Value q = b.Input("q", dtype,
                    {batch, StaticDim(heads), seq_q, StaticDim(head_dim)});
  Value k = b.Input("k", dtype,
                    {batch, StaticDim(kv_heads), seq_k, StaticDim(head_dim)});
  Value v = b.Input("v", dtype,
                    {batch, StaticDim(kv_heads), seq_k, StaticDim(value_dim)});
  if (o.bias) ao.bias = ShapedValue{b.Input("bias", dtype, scores), scores};
  if (o.mask) {
    ao.mask = ShapedValue{b.Input("mask", v1::DTYPE_BOOL, scores), scores};
  }
  if (o.lengths) {
    ao.lengths =
        ShapedValue{b.Input("lengths", v1::DTYPE_I32, {batch}), {batch}};
  }
  AttentionResult r = Attention(b, q, k, v, ao);
  b.Output("out", r.out);
  if (r.lse.has_value()) b.Output("lse", *r.lse);
  return b.Build();
}

// x (or logp) [rows, width] and "labels" [rows] in; "loss" out.
absl::StatusOr<v1::Chain> LossChain(Composite c, v1::DType dtype,
                                    const std::vector<v1::Dim>& row_shape,
                                    const ChainOptions& o) {
  Labels labels;
  if (o.labels_dtype == "i32") {
    labels.dtype = v1::DTYPE_I32;
  } else if (!o.labels_dtype.empty() && o.labels_dtype != "i64") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--labels-dtype ", o.labels_dtype, ": expected i32 or i64"));
  }
  ClassLossOptions lo;
  lo.ignore_index = o.ignore_index.value_or(-100);
  // Labels are compared as i32 (the builder refuses, without naming the flag).
  if (lo.ignore_index < INT32_MIN || lo.ignore_index > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ignore-index ", lo.ignore_index,
        ": outside i32 (labels are compared as i32)"));
  }
  const std::pair<const char*, LossReduction> kReductions[] = {
      {"none", LossReduction::kNone},
      {"sum", LossReduction::kSum},
      {"mean", LossReduction::kMean},
  };
  bool known = o.reduction.empty();
  for (const auto& [name, r] : kReductions) {
    if (o.reduction == name) {
      lo.reduction = r;
      known = true;
    }
  }
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reduction ", o.reduction, ": expected none, sum or mean"));
  }
  ChainBuilder b;
  const bool logits = c == Composite::kCrossEntropy;
  const ShapedValue x{b.Input(logits ? "x" : "logp", dtype, row_shape),
                      row_shape};
  labels.value = b.Input("labels", labels.dtype, {row_shape[0]});
  b.Output("loss", logits ? CrossEntropy(b, x, dtype, labels, lo)
                          : NllLoss(b, x, dtype, labels, lo));
  return b.Build();
}

absl::StatusOr<v1::Chain> CompositeChain(const ChainOptions& o) {
  KFUSE_ASSIGN_OR_RETURN(Composite c, ParseComposite(o.composite));
  KFUSE_RETURN_IF_ERROR(CheckFlags(c, o));
  if (c == Composite::kAttention) return AttentionChain(o);
  KFUSE_ASSIGN_OR_RETURN(v1::DType dtype, ParseFloatDType(o.dtype));
  if (!o.width.has_value()) {
    return absl::InvalidArgumentError("--width: required, a size >= 1");
  }
  if (*o.width < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--width ", *o.width, ": required, a size >= 1"));
  }
  const int64_t width = *o.width;
  KFUSE_ASSIGN_OR_RETURN(v1::Dim rows, RowsDim(o));
  const std::vector<v1::Dim> row_shape = {rows, StaticDim(width)};
  const std::vector<v1::Dim> width_shape = {StaticDim(width)};

  if (c == Composite::kCrossEntropy || c == Composite::kNllLoss) {
    return LossChain(c, dtype, row_shape, o);
  }
  ChainBuilder b;
  Value x = b.Input("x", dtype, row_shape);
  if (c == Composite::kLinear) {
    KFUSE_ASSIGN_OR_RETURN(Activation act, ParseActivation(o.activation));
    const int64_t out = *o.out_features;
    Value weight =
        b.Input("weight", dtype, {StaticDim(out), StaticDim(width)});
    std::optional<Value> bias;
    if (o.bias) bias = b.Input("bias", dtype, {StaticDim(out)});
    b.Output("y", Linear(b, x, weight, bias, act));
    return b.Build();
  }
  if (c == Composite::kSoftmax) {
    SoftmaxOptions so;
    so.scale = o.scale;
    if (o.bias) so.bias = b.Input("bias", dtype, row_shape);
    if (o.mask) so.mask = b.Input("mask", v1::DTYPE_BOOL, row_shape);
    b.Output("y", Softmax(b, x, so));
    return b.Build();
  }
  if (c == Composite::kLogSoftmax) {
    b.Output("y", LogSoftmax(b, x));
    return b.Build();
  }
  const bool add = c == Composite::kAddRmsNorm || c == Composite::kAddLayerNorm;
  const bool layer =
      c == Composite::kLayerNorm || c == Composite::kAddLayerNorm;
  std::optional<Value> residual, weight, bias;
  if (add) residual = b.Input("residual", dtype, row_shape);
  if (!o.no_weight) weight = b.Input("weight", dtype, width_shape);
  if (o.bias) bias = b.Input("bias", dtype, width_shape);
  const double eps = o.eps.value_or(layer ? 1e-5 : 1e-6);
  if (add) {
    AddNorm y = layer ? AddLayerNorm(b, x, *residual, weight, bias, eps)
                      : AddRmsNorm(b, x, *residual, weight, eps);
    b.Output("sum", y.sum);
    b.Output("normed", y.normed);
  } else {
    b.Output("y", layer ? LayerNorm(b, x, weight, bias, eps)
                        : RmsNorm(b, x, weight, eps));
  }
  return b.Build();
}

}  // namespace

int RunChain(const GlobalOptions& g, const ChainOptions& o, CliIo& io) {
  absl::StatusOr<v1::Chain> chain = CompositeChain(o);
  if (!chain.ok()) {
    ReportError(g, chain.status(), io);
    return kExitUsage;
  }
  const std::string json = ToJson(*chain, /*pretty=*/!g.json) + "\n";
  if (o.out.empty()) {
    io.out << json;
    return kExitOk;
  }
  absl::Status written = WriteFile(o.out, json);
  if (!written.ok()) return ReportError(g, written, io);
  if (!g.json) io.out << "wrote " << o.out << "\n";
  return kExitOk;
}

}  // namespace kfuse::client
