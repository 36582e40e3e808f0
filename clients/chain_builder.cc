#include "clients/chain_builder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace kfuse::client {
namespace {

// Ids tell one builder's Values from another's; 0 is the unset Value.
uint64_t NextBuilderId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

absl::Status CheckDType(v1::DType dtype, absl::string_view field) {
  if (dtype == v1::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": unspecified"));
  }
  if (!v1::DType_IsValid(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": unknown dtype ", static_cast<int>(dtype)));
  }
  return absl::OkStatus();
}

absl::Status CheckDim(const v1::Dim& d, absl::string_view field) {
  switch (d.kind_case()) {
    case v1::Dim::kSize:
      if (d.size() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".size: ", d.size(), " is negative"));
      }
      return absl::OkStatus();
    case v1::Dim::kSymbol:
      if (d.symbol().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".symbol: empty"));
      }
      if (d.hint() < 0 || d.max() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, d.hint() < 0 ? ".hint" : ".max", ": negative"));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": neither a size nor a symbol"));
  }
}

}  // namespace

v1::Dim StaticDim(int64_t size) {
  v1::Dim d;
  d.set_size(size);
  return d;
}

v1::Dim SymbolDim(absl::string_view symbol, int64_t hint, int64_t max) {
  v1::Dim d;
  d.set_symbol(std::string(symbol));
  d.set_hint(hint);
  d.set_max(max);
  return d;
}

v1::Ref Value::ref() const {
  v1::Ref r;
  if (input_) {
    r.set_input(index_);
  } else {
    r.set_op(index_);
  }
  return r;
}

ChainBuilder::ChainBuilder() : id_(NextBuilderId()) {}

void ChainBuilder::Fail(std::string message) {
  if (error_.ok()) error_ = absl::InvalidArgumentError(std::move(message));
}

absl::Status ChainBuilder::Check(const Value& v,
                                 absl::string_view field) const {
  if (!v.is_set()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": an unset Value (a default one, or one a failed call gave)"));
  }
  if (v.builder_ != id_) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": a Value of another ChainBuilder"));
  }
  const int size = v.input_ ? chain_.inputs_size() : chain_.ops_size();
  if (v.index_ >= static_cast<uint32_t>(size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", v.input_ ? "input " : "op ", v.index_,
                     " is not in this builder (it was moved from)"));
  }
  return absl::OkStatus();
}

Value ChainBuilder::Made(bool input, int index) const {
  Value v;
  v.builder_ = id_;
  v.input_ = input;
  v.index_ = static_cast<uint32_t>(index);
  return v;
}

Value ChainBuilder::Input(absl::string_view name, v1::DType dtype,
                          std::vector<v1::Dim> shape,
                          std::vector<int64_t> strides) {
  const std::string field = absl::StrCat("inputs[", chain_.inputs_size(), "]");
  absl::Status s = name.empty()
                       ? absl::InvalidArgumentError(field + ".name: empty")
                       : CheckDType(dtype, field + ".dtype");
  for (size_t i = 0; s.ok() && i < shape.size(); ++i) {
    s = CheckDim(shape[i], absl::StrCat(field, ".shape[", i, "]"));
  }
  if (!s.ok()) {
    Fail(std::string(s.message()));
    return Value();
  }
  v1::TensorSpec& spec = *chain_.add_inputs();
  spec.set_name(std::string(name));
  spec.set_dtype(dtype);
  for (v1::Dim& d : shape) *spec.add_shape() = std::move(d);
  for (int64_t st : strides) spec.add_strides(st);
  return Made(/*input=*/true, chain_.inputs_size() - 1);
}

Value ChainBuilder::Constant(double value) {
  v1::Op op = OpOf(v1::OP_CONSTANT);
  op.set_value(value);
  return Append(std::move(op), {});
}

Value ChainBuilder::FloatScalar(double value) {
  v1::Op op = OpOf(v1::OP_CONSTANT);
  op.set_value(value);
  // As Python's float.is_integer(): false for infinities and NaN, whose
  // type is float anyway.
  op.set_weak_float(std::isfinite(value) && value == std::trunc(value));
  return Append(std::move(op), {});
}

Value ChainBuilder::Constant(double value, v1::DType dtype) {
  v1::Op op = OpOf(v1::OP_CONSTANT);
  op.set_value(value);
  op.set_dtype(dtype);
  return Append(std::move(op), {});
}

Value ChainBuilder::Cast(Value x, v1::DType dtype) {
  v1::Op op = OpOf(v1::OP_CAST);
  op.set_dtype(dtype);
  return Append(std::move(op), {x});
}

Value ChainBuilder::Activate(Value x, Activation act) {
  switch (act) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return Relu(x);
    case Activation::kSilu:
      return Silu(x);
    case Activation::kGelu:
      return Gelu(x);
    case Activation::kGeluTanh:
      return GeluTanh(x);
    case Activation::kSigmoid:
      return Sigmoid(x);
    case Activation::kTanh:
      return Tanh(x);
  }
  Fail(absl::StrCat("ops[", chain_.ops_size(), "] activation: ",
                    static_cast<int>(act), " is not an Activation"));
  return Value();
}

Value ChainBuilder::Permute(Value x, std::vector<int32_t> perm) {
  v1::Op op = OpOf(v1::OP_PERMUTE);
  v1::PermuteAttrs& attrs = *op.mutable_permute();  // Set even when empty.
  for (int32_t p : perm) attrs.add_perm(p);
  return Append(std::move(op), {x});
}

Value ChainBuilder::Reshape(Value x, std::vector<v1::Dim> shape) {
  const std::string field = absl::StrCat("ops[", chain_.ops_size(), "]");
  for (size_t i = 0; i < shape.size(); ++i) {
    absl::Status s =
        CheckDim(shape[i], absl::StrCat(field, ".shape.shape[", i, "]"));
    if (!s.ok()) {
      Fail(std::string(s.message()));
      return Value();
    }
  }
  v1::Op op = OpOf(v1::OP_RESHAPE);
  v1::ShapeAttrs& attrs = *op.mutable_shape();  // Set even when rank 0.
  for (v1::Dim& d : shape) *attrs.add_shape() = std::move(d);
  return Append(std::move(op), {x});
}

Value ChainBuilder::Iota(std::vector<v1::Dim> shape, int32_t axis,
                         v1::DType dtype) {
  const std::string field = absl::StrCat("ops[", chain_.ops_size(), "]");
  const int32_t rank = static_cast<int32_t>(shape.size());
  absl::Status s = absl::OkStatus();
  if (rank == 0 ? axis != 0 : (axis < -rank || axis >= rank)) {
    s = absl::InvalidArgumentError(
        absl::StrCat(field, ".axis.axis (OP_IOTA): ", axis,
                     " is out of range for rank ", rank));
  }
  for (size_t i = 0; s.ok() && i < shape.size(); ++i) {
    s = CheckDim(shape[i], absl::StrCat(field, ".shape.shape[", i, "]"));
  }
  if (!s.ok()) {
    Fail(std::string(s.message()));
    return Value();
  }
  v1::Op op = OpOf(v1::OP_IOTA);
  op.set_dtype(dtype);
  v1::ShapeAttrs& attrs = *op.mutable_shape();
  for (v1::Dim& d : shape) *attrs.add_shape() = std::move(d);
  op.mutable_axis()->set_axis(axis < 0 ? axis + rank : axis);
  return Append(std::move(op), {});
}

Value ChainBuilder::Reduce(v1::OpKind kind, Value x, int32_t axis,
                           bool keepdim) {
  v1::Op op = OpOf(kind);
  op.mutable_reduce()->add_axes(axis);
  op.mutable_reduce()->set_keepdim(keepdim);
  return Append(std::move(op), {x});
}

Value ChainBuilder::Reduce(v1::OpKind kind, Value x,
                           const std::vector<int32_t>& axes, bool keepdim) {
  v1::Op op = OpOf(kind);
  for (int32_t a : axes) op.mutable_reduce()->add_axes(a);
  op.mutable_reduce()->set_keepdim(keepdim);
  return Append(std::move(op), {x});
}

Value ChainBuilder::Append(v1::Op op, const std::vector<Value>& args) {
  const std::string field = absl::StrCat("ops[", chain_.ops_size(), "]");
  const std::string kind = v1::OpKind_IsValid(op.kind())
                               ? v1::OpKind_Name(op.kind())
                               : absl::StrCat(static_cast<int>(op.kind()));
  absl::Status s =
      op.kind() == v1::OP_UNSPECIFIED
          ? absl::InvalidArgumentError(field + ".kind: unspecified")
          : absl::OkStatus();
  if (s.ok() && op.dtype() != v1::DTYPE_UNSPECIFIED) {
    s = CheckDType(op.dtype(), absl::StrCat(field, ".dtype (", kind, ")"));
  }
  op.clear_args();
  for (size_t i = 0; s.ok() && i < args.size(); ++i) {
    s = Check(args[i], absl::StrCat(field, ".args[", i, "] (", kind, ")"));
    if (s.ok()) *op.add_args() = args[i].ref();
  }
  if (!s.ok()) {
    Fail(std::string(s.message()));
    return Value();
  }
  *chain_.add_ops() = std::move(op);
  return Made(/*input=*/false, chain_.ops_size() - 1);
}

void ChainBuilder::Output(absl::string_view name, Value v) {
  const std::string field =
      absl::StrCat("outputs[", chain_.outputs_size(), "]");
  absl::Status s = Check(v, field + ".value");
  if (name.empty()) s = absl::InvalidArgumentError(field + ".name: empty");
  for (int i = 0; s.ok() && i < chain_.outputs_size(); ++i) {
    if (chain_.outputs(i).name() == name) {
      s = absl::InvalidArgumentError(absl::StrCat(
          field, ".name: '", name, "' already names outputs[", i, "]"));
    }
  }
  if (!s.ok()) {
    Fail(std::string(s.message()));
    return;
  }
  v1::Output& out = *chain_.add_outputs();
  out.set_name(std::string(name));
  *out.mutable_value() = v.ref();
}

absl::StatusOr<v1::Chain> ChainBuilder::Build() const {
  if (!error_.ok()) return error_;
  if (chain_.outputs().empty()) {
    return absl::InvalidArgumentError(
        "outputs: none; name at least one with Output()");
  }
  return chain_;
}

// ---------------------------------------------------------------------------
// Composites. Each operand goes into a local before its use so that the ops
// come out in the Python client's order, and a constant the Python builder
// writes from a float (float(scale), 0.0) is a FloatScalar here, so both
// clients send one chain and share its key.

Value Softmax(ChainBuilder& b, Value x, const SoftmaxOptions& options) {
  if (options.scale.has_value()) {
    Value scale = b.FloatScalar(*options.scale);
    x = b.Mul(x, scale);
  }
  if (options.bias.has_value()) x = b.Add(x, *options.bias);
  if (options.mask.has_value()) {
    Value neg_inf = b.Constant(-HUGE_VAL);
    x = b.Where(*options.mask, x, neg_inf);
  }
  Value max = b.ReduceMax(x, options.axis, /*keepdim=*/true);
  Value e = b.Exp(b.Sub(x, max));
  Value sum = b.ReduceSum(e, options.axis, /*keepdim=*/true);
  return b.Div(e, sum);
}

Value LogSoftmax(ChainBuilder& b, Value x, int32_t axis) {
  Value max = b.ReduceMax(x, axis, /*keepdim=*/true);
  Value shifted = b.Sub(x, max);
  Value sum = b.ReduceSum(b.Exp(shifted), axis, /*keepdim=*/true);
  return b.Sub(shifted, b.Log(sum));
}

Value LayerNorm(ChainBuilder& b, Value x, std::optional<Value> weight,
                std::optional<Value> bias, double eps) {
  Value mean = b.ReduceMean(x, -1, /*keepdim=*/true);
  Value d = b.Sub(x, mean);
  Value var = b.ReduceMean(b.Square(d), -1, /*keepdim=*/true);
  Value eps_c = b.FloatScalar(eps);
  Value y = b.Mul(d, b.Rsqrt(b.Add(var, eps_c)));
  if (weight.has_value()) y = b.Mul(y, *weight);
  if (bias.has_value()) y = b.Add(y, *bias);
  return y;
}

Value RmsNorm(ChainBuilder& b, Value x, std::optional<Value> weight,
              double eps) {
  Value ms = b.ReduceMean(b.Square(x), -1, /*keepdim=*/true);
  Value eps_c = b.FloatScalar(eps);
  Value y = b.Mul(x, b.Rsqrt(b.Add(ms, eps_c)));
  return weight.has_value() ? b.Mul(y, *weight) : y;
}

AddNorm AddRmsNorm(ChainBuilder& b, Value x, Value residual,
                   std::optional<Value> weight, double eps) {
  Value sum = b.Add(x, residual);
  return AddNorm{sum, RmsNorm(b, sum, weight, eps)};
}

AddNorm AddLayerNorm(ChainBuilder& b, Value x, Value residual,
                     std::optional<Value> weight, std::optional<Value> bias,
                     double eps) {
  Value sum = b.Add(x, residual);
  return AddNorm{sum, LayerNorm(b, sum, weight, bias, eps)};
}

Value Linear(ChainBuilder& b, Value x, Value weight, std::optional<Value> bias,
             Activation act) {
  Value weight_t = b.Permute(weight, {1, 0});
  Value y = b.Matmul(x, weight_t);
  if (bias.has_value()) y = b.Add(y, *bias);
  return b.Activate(y, act);
}

namespace {

// A dim as the Python builder writes it into an op's shape: the size, or the
// symbol's name alone (tensors there carry names, not hints).
v1::Dim Bare(const v1::Dim& d) {
  return d.kind_case() == v1::Dim::kSymbol ? SymbolDim(d.symbol())
                                           : StaticDim(d.size());
}

std::vector<v1::Dim> Bare(const std::vector<v1::Dim>& dims) {
  std::vector<v1::Dim> out;
  out.reserve(dims.size());
  for (const v1::Dim& d : dims) out.push_back(Bare(d));
  return out;
}

std::vector<v1::Dim> Concat(std::vector<v1::Dim> a,
                            const std::vector<v1::Dim>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool IsOne(const v1::Dim& d) {
  return d.kind_case() == v1::Dim::kSize && d.size() == 1;
}

// The Python builder's broadcast: dims aligned at the end, each the first
// (a's, then b's) that is not a static 1.
std::vector<v1::Dim> Broadcast(const std::vector<v1::Dim>& a,
                               const std::vector<v1::Dim>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<v1::Dim> out;
  for (size_t i = 0; i < rank; ++i) {
    v1::Dim dim = StaticDim(1);
    for (const std::vector<v1::Dim>* s : {&a, &b}) {
      if (i + s->size() < rank) continue;
      const v1::Dim& d = (*s)[i + s->size() - rank];
      if (!IsOne(d)) {
        dim = Bare(d);
        break;
      }
    }
    out.push_back(std::move(dim));
  }
  return out;
}

absl::Status CheckPositive(int64_t n, absl::string_view field) {
  if (n >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", n, " must be >= 1"));
}

// A size >= 1 or a named symbol.
absl::Status CheckExtent(const v1::Dim& d, absl::string_view field) {
  KFUSE_RETURN_IF_ERROR(CheckDim(d, field));
  if (d.kind_case() == v1::Dim::kSize) {
    return CheckPositive(d.size(), absl::StrCat(field, ".size"));
  }
  return absl::OkStatus();
}

absl::Status CheckShape(const std::vector<v1::Dim>& shape,
                        absl::string_view field) {
  for (size_t i = 0; i < shape.size(); ++i) {
    KFUSE_RETURN_IF_ERROR(CheckDim(shape[i], absl::StrCat(field, "[", i, "]")));
  }
  return absl::OkStatus();
}

// With grouped queries a bias or mask of rank >= 3 splits its head dim as q's
// (heads) or keeps a broadcast one (1); any other head dim is refused.
absl::Status CheckGroupedHeads(const ShapedValue& t, int64_t heads,
                               absl::string_view field) {
  const size_t rank = t.shape.size();
  if (rank < 3) return absl::OkStatus();
  const v1::Dim& h = t.shape[rank - 3];
  if (h.kind_case() == v1::Dim::kSize && (h.size() == heads || h.size() == 1)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, ".shape[", rank - 3, "]: ",
      h.kind_case() == v1::Dim::kSize ? absl::StrCat(h.size())
                                      : absl::StrCat("'", h.symbol(), "'"),
      " heads do not split into kv_heads groups; with kv_heads < heads it "
      "must be heads (",
      heads, ") or 1"));
}

absl::Status CheckAttention(const AttentionOptions& o) {
  for (size_t i = 0; i < o.batch.size(); ++i) {
    KFUSE_RETURN_IF_ERROR(
        CheckExtent(o.batch[i], absl::StrCat("attention.batch[", i, "]")));
  }
  KFUSE_RETURN_IF_ERROR(CheckPositive(o.heads, "attention.heads"));
  if (o.kv_heads.has_value()) {
    KFUSE_RETURN_IF_ERROR(CheckPositive(*o.kv_heads, "attention.kv_heads"));
    if (o.heads % *o.kv_heads != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention.kv_heads: ", *o.kv_heads,
                       " does not divide heads (", o.heads, ")"));
    }
  }
  KFUSE_RETURN_IF_ERROR(CheckExtent(o.seq_q, "attention.seq_q"));
  KFUSE_RETURN_IF_ERROR(CheckExtent(o.seq_k, "attention.seq_k"));
  KFUSE_RETURN_IF_ERROR(CheckPositive(o.head_dim, "attention.head_dim"));
  if (o.value_dim.has_value()) {
    KFUSE_RETURN_IF_ERROR(CheckPositive(*o.value_dim, "attention.value_dim"));
  }
  if (o.scale.has_value() && !std::isfinite(*o.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention.scale: ", *o.scale, " is not finite"));
  }
  const bool grouped = o.kv_heads.value_or(o.heads) != o.heads;
  const std::pair<const std::optional<ShapedValue>*, const char*> operands[] = {
      {&o.bias, "attention.bias"},
      {&o.mask, "attention.mask"},
      {&o.lengths, "attention.lengths"},
  };
  for (const auto& [t, field] : operands) {
    if (!t->has_value()) continue;
    KFUSE_RETURN_IF_ERROR(
        CheckShape((*t)->shape, absl::StrCat(field, ".shape")));
    if (grouped && t != &o.lengths) {
      KFUSE_RETURN_IF_ERROR(CheckGroupedHeads(**t, o.heads, field));
    }
  }
  const size_t score_rank = o.batch.size() + (grouped ? 4 : 3);
  if (o.lengths.has_value() && o.lengths->shape.size() > score_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention.lengths.shape: rank ", o.lengths->shape.size(),
                     " is above the scores' (", score_rank, ")"));
  }
  return absl::OkStatus();
}

// A bias or mask [..., heads or 1, Lq, Lk] as [..., kv_heads, groups, Lq, Lk]
// or [..., 1, 1, Lq, Lk], as q is split; below rank 3 it broadcasts as is.
void SplitHeads(ChainBuilder& b, int64_t heads, int64_t kv_heads,
                std::optional<ShapedValue>& t) {
  if (!t.has_value() || t->shape.size() < 3) return;
  const size_t rank = t->shape.size();
  const bool per_head = t->shape[rank - 3].size() == heads;
  std::vector<v1::Dim> shape(t->shape.begin(), t->shape.end() - 3);
  shape = Bare(shape);
  shape.push_back(StaticDim(per_head ? kv_heads : 1));
  shape.push_back(StaticDim(per_head ? heads / kv_heads : 1));
  shape.push_back(Bare(t->shape[rank - 2]));
  shape.push_back(Bare(t->shape[rank - 1]));
  t->value = b.Reshape(t->value, shape);
  t->shape = std::move(shape);
}

// x's element at each row's label (classes along x's last axis): the sum
// of x where an iota along the row equals the label. Returns the pick and
// the label in i32.
std::pair<Value, Value> Pick(ChainBuilder& b, const ShapedValue& x,
                             const Labels& labels) {
  if (labels.dtype != v1::DTYPE_I32 && labels.dtype != v1::DTYPE_I64) {
    b.Invalid(absl::StrCat("a class loss: labels.dtype ",
                           v1::DType_Name(labels.dtype),
                           ": class labels are DTYPE_I32 or DTYPE_I64"));
    return {Value(), Value()};
  }
  if (x.shape.empty()) {
    b.Invalid("a class loss: x has no class axis (its shape is empty)");
    return {Value(), Value()};
  }
  Value label = labels.dtype == v1::DTYPE_I32
                    ? labels.value
                    : b.Cast(labels.value, v1::DTYPE_I32);
  std::vector<v1::Dim> column_shape;
  for (size_t i = 0; i + 1 < x.shape.size(); ++i) {
    column_shape.push_back(Bare(x.shape[i]));
  }
  column_shape.push_back(StaticDim(1));
  Value column = b.Reshape(label, std::move(column_shape));
  Value iota = b.Iota({Bare(x.shape.back())}, 0);
  Value hit = b.Eq(iota, column);
  Value zero = b.Constant(0);
  return {b.ReduceSum(b.Where(hit, x.value, zero), -1), label};
}

// A per-row loss reduced as torch's losses do: summed in f32 (over the rows
// kept, for a mean) and cast back to `dtype` once.
Value ReduceLoss(ChainBuilder& b, Value loss, Value kept, size_t rank,
                 v1::DType dtype, LossReduction reduction) {
  if (reduction == LossReduction::kNone) return loss;
  std::vector<int32_t> axes;
  for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int32_t>(i));
  Value total = b.Cast(loss, v1::DTYPE_F32);
  if (!axes.empty()) total = b.Reduce(v1::OP_REDUCE_SUM, total, axes, false);
  if (reduction == LossReduction::kMean) {
    Value count = b.Cast(kept, v1::DTYPE_F32);
    if (!axes.empty()) count = b.Reduce(v1::OP_REDUCE_SUM, count, axes, false);
    total = b.Div(total, count);
  }
  return b.Cast(total, dtype);
}

// The loss a row, 0 where its label is ignore_index, reduced: from logits,
// logsumexp(x) - pick; from log-probabilities, -pick.
Value ClassLoss(ChainBuilder& b, const ShapedValue& x, v1::DType dtype,
                const Labels& labels, const ClassLossOptions& options,
                bool logits) {
  auto [picked, label] = Pick(b, x, labels);
  Value lse;
  if (logits) {
    Value max = b.ReduceMax(x.value, -1, /*keepdim=*/true);
    Value sum = b.ReduceSum(b.Exp(b.Sub(x.value, max)), -1);
    Value log = b.Log(sum);
    lse = b.Add(log, b.ReduceMax(x.value, -1));
  }
  if (options.ignore_index < std::numeric_limits<int32_t>::min() ||
      options.ignore_index > std::numeric_limits<int32_t>::max()) {
    b.Invalid(absl::StrCat("a class loss: ignore_index ", options.ignore_index,
                           " is outside i32 (labels are compared as i32)"));
    return Value();
  }
  Value ignore = b.Constant(static_cast<double>(options.ignore_index));
  Value kept = b.Ne(label, ignore);
  Value loss = logits ? b.Sub(lse, picked) : b.Neg(picked);
  Value zero = b.Constant(0);
  return ReduceLoss(b, b.Where(kept, loss, zero), kept,
                    x.shape.empty() ? 0 : x.shape.size() - 1, dtype,
                    options.reduction);
}

}  // namespace

Value CrossEntropy(ChainBuilder& b, const ShapedValue& x, v1::DType dtype,
                   const Labels& labels, const ClassLossOptions& options) {
  return ClassLoss(b, x, dtype, labels, options, /*logits=*/true);
}

Value NllLoss(ChainBuilder& b, const ShapedValue& logp, v1::DType dtype,
              const Labels& labels, const ClassLossOptions& options) {
  return ClassLoss(b, logp, dtype, labels, options, /*logits=*/false);
}

AttentionResult Attention(ChainBuilder& b, Value q, Value k, Value v,
                          const AttentionOptions& options) {
  AttentionResult result;
  if (options.return_lse) result.lse = Value();
  if (absl::Status s = CheckAttention(options); !s.ok()) {
    b.Invalid(std::string(s.message()));
    return result;
  }
  const int64_t heads = options.heads;
  const int64_t kv_heads = options.kv_heads.value_or(heads);
  const int64_t groups = heads / kv_heads;
  const v1::Dim dq = StaticDim(options.head_dim);
  const v1::Dim dv = StaticDim(options.value_dim.value_or(options.head_dim));
  const v1::Dim seq_q = Bare(options.seq_q);
  const v1::Dim seq_k = Bare(options.seq_k);
  const std::vector<v1::Dim> lead = Bare(options.batch);
  const std::vector<v1::Dim> rows = Concat(lead, {StaticDim(heads), seq_q});

  // The dims between the batch and the sequences: [heads], or [kv_heads,
  // groups] with q's heads split so that k and v broadcast over the groups.
  std::vector<v1::Dim> head_dims = {StaticDim(heads)};
  std::optional<ShapedValue> bias = options.bias;
  std::optional<ShapedValue> mask = options.mask;
  if (groups > 1) {
    head_dims = {StaticDim(kv_heads), StaticDim(groups)};
    const std::vector<v1::Dim> kv = {StaticDim(kv_heads), StaticDim(1)};
    q = b.Reshape(
        q, Concat(lead, {StaticDim(kv_heads), StaticDim(groups), seq_q, dq}));
    k = b.Reshape(k, Concat(Concat(lead, kv), {seq_k, dq}));
    v = b.Reshape(v, Concat(Concat(lead, kv), {seq_k, dv}));
    SplitHeads(b, heads, kv_heads, bias);
    SplitHeads(b, heads, kv_heads, mask);
  }

  std::vector<v1::Dim> scores = Concat(Concat(lead, head_dims), {seq_q, seq_k});
  const int32_t rank = static_cast<int32_t>(scores.size());
  std::vector<int32_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 2], perm[rank - 1]);
  Value k_t = b.Permute(k, perm);
  Value s = b.Matmul(q, k_t);
  Value scale = b.FloatScalar(options.scale.value_or(
      1.0 / std::sqrt(static_cast<double>(options.head_dim))));
  s = b.Mul(s, scale);
  if (bias.has_value()) {
    s = b.Add(s, bias->value);
    scores = Broadcast(scores, bias->shape);
  }

  std::optional<Value> allowed;
  if (mask.has_value()) allowed = mask->value;
  if (options.causal || options.lengths.has_value()) {
    const int32_t r = static_cast<int32_t>(scores.size());
    Value col = b.Iota(scores, r - 1);
    if (options.causal) {
      Value row = b.Iota(scores, r - 2);
      Value c = b.Le(col, row);
      allowed = allowed.has_value() ? b.LogicalAnd(*allowed, c) : c;
    }
    if (options.lengths.has_value()) {
      std::vector<v1::Dim> shape = Bare(options.lengths->shape);
      shape.resize(scores.size(), StaticDim(1));
      Value lens = b.Reshape(options.lengths->value, shape);
      Value c = b.Lt(col, lens);
      allowed = allowed.has_value() ? b.LogicalAnd(*allowed, c) : c;
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  if (allowed.has_value()) {
    Value neg_inf = b.Constant(-inf);
    s = b.Where(*allowed, s, neg_inf);
  }
  Value max = b.ReduceMax(s, -1, /*keepdim=*/true);
  Value e = b.Exp(b.Sub(s, max));
  Value sum = b.ReduceSum(e, -1, /*keepdim=*/true);
  Value p = b.Div(e, sum);
  if (mask.has_value() || options.lengths.has_value() || bias.has_value()) {
    // A row with every key masked (a -inf bias too) has max -inf and NaN
    // weights: zeros, as SDPA.
    Value neg_inf = b.Constant(-inf);
    Value empty = b.Eq(max, neg_inf);
    Value zero = b.FloatScalar(0.0);
    p = b.Where(empty, zero, p);
  }
  Value out = b.Matmul(p, v);
  if (groups > 1) out = b.Reshape(out, Concat(rows, {dv}));
  result.out = out;
  if (!options.return_lse) return result;
  Value log_sum = b.Log(sum);
  Value lse = b.Cast(b.Add(max, log_sum), v1::DTYPE_F32);
  result.lse = b.Reshape(lse, rows);
  return result;
}

}  // namespace kfuse::client
