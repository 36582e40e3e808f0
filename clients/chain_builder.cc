#include "clients/chain_builder.h"

#include <atomic>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

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

Value ChainBuilder::Reduce(v1::OpKind kind, Value x, int32_t axis,
                           bool keepdim) {
  v1::Op op = OpOf(kind);
  op.mutable_reduce()->add_axes(axis);
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
// come out in the Python client's order.

Value Softmax(ChainBuilder& b, Value x, const SoftmaxOptions& options) {
  if (options.scale.has_value()) {
    Value scale = b.Constant(*options.scale);
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
  Value eps_c = b.Constant(eps);
  Value y = b.Mul(d, b.Rsqrt(b.Add(var, eps_c)));
  if (weight.has_value()) y = b.Mul(y, *weight);
  if (bias.has_value()) y = b.Add(y, *bias);
  return y;
}

Value RmsNorm(ChainBuilder& b, Value x, std::optional<Value> weight,
              double eps) {
  Value ms = b.ReduceMean(b.Square(x), -1, /*keepdim=*/true);
  Value eps_c = b.Constant(eps);
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

}  // namespace kfuse::client
