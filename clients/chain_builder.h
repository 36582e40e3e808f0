// Builds a kfuse.v1.Chain (the wire message) from C++ calls, with the
// composites (softmax, normalisation layers, linear layers, attention)
// expanded into the primitives the proto has, op for op as the Python client
// expands them.
//
//   ChainBuilder b;
//   Value x = b.Input("x", v1::DTYPE_BF16,
//                     {SymbolDim("tokens", /*hint=*/16384), StaticDim(4096)});
//   Value res = b.Input("residual", v1::DTYPE_BF16,
//                       {SymbolDim("tokens", 16384), StaticDim(4096)});
//   Value w = b.Input("weight", v1::DTYPE_BF16, {StaticDim(4096)});
//   AddNorm y = AddRmsNorm(b, x, res, w, /*eps=*/1e-6);
//   b.Output("hidden", y.sum);
//   b.Output("normed", y.normed);
//   KFUSE_ASSIGN_OR_RETURN(v1::Chain chain, b.Build());
//
// Ops are appended in call order. C++ leaves the order of a call's arguments
// unspecified, so build operands into named locals first when the op order
// matters (it does for golden comparisons, never for meaning).
//
// Misuse never crashes: a Value of another builder, an unset Value or a bad
// input spec records an error naming the field, later calls go on returning
// unset Values, and Build() answers INVALID_ARGUMENT with the first error.
// Shapes and dtypes are not checked here; the server validates the chain and
// names the op that is wrong.
#ifndef KFUSE_CLIENTS_CHAIN_BUILDER_H_
#define KFUSE_CLIENTS_CHAIN_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse::client {

// A static dim, and a runtime-sized one shared by every dim of that symbol.
v1::Dim StaticDim(int64_t size);
v1::Dim SymbolDim(absl::string_view symbol, int64_t hint = 0, int64_t max = 0);

// The element-wise activation a composite ends with (Linear's).
enum class Activation {
  kNone,
  kRelu,
  kSilu,
  kGelu,  // The erf form (OP_GELU_ERF), torch's default.
  kGeluTanh,
  kSigmoid,
  kTanh,
};

// A chain input or op result of one ChainBuilder; cheap to copy. A
// default-constructed Value is unset.
class Value {
 public:
  Value() = default;
  bool is_set() const { return builder_ != 0; }
  // The wire reference: input i or op j.
  v1::Ref ref() const;

 private:
  friend class ChainBuilder;
  uint64_t builder_ = 0;  // The owning builder's id; 0: unset.
  bool input_ = false;
  uint32_t index_ = 0;
};

class ChainBuilder {
 public:
  ChainBuilder();
  ChainBuilder(ChainBuilder&&) = default;
  ChainBuilder& operator=(ChainBuilder&&) = default;
  ChainBuilder(const ChainBuilder&) = delete;
  ChainBuilder& operator=(const ChainBuilder&) = delete;

  // A chain input; `strides` empty means contiguous row-major.
  Value Input(absl::string_view name, v1::DType dtype,
              std::vector<v1::Dim> shape, std::vector<int64_t> strides = {});
  // A weak scalar (typed by its use, as a Python number in PyTorch): an int
  // when `value` is whole, else a float. FloatScalar(2.0) is Python's 2.0, a
  // float whatever its value (i32 tensor * FloatScalar(2.0) is f32); only a
  // whole value needs saying so on the wire (`weak_float`), so FloatScalar
  // writes the op the Python builder writes for the same number. Or a scalar
  // held in `dtype`.
  Value Constant(double value);
  Value FloatScalar(double value);
  Value Constant(double value, v1::DType dtype);
  // Names `v` as a chain output. Names must be unique and non-empty.
  void Output(absl::string_view name, Value v);

  // Any op: `op` carries the kind and attributes, `args` become its refs.
  Value Append(v1::Op op, const std::vector<Value>& args);
  Value Unary(v1::OpKind kind, Value x) { return Append(OpOf(kind), {x}); }
  Value Binary(v1::OpKind kind, Value a, Value b) {
    return Append(OpOf(kind), {a, b});
  }

  Value Neg(Value x) { return Unary(v1::OP_NEG, x); }
  Value Abs(Value x) { return Unary(v1::OP_ABS, x); }
  Value Exp(Value x) { return Unary(v1::OP_EXP, x); }
  Value Exp2(Value x) { return Unary(v1::OP_EXP2, x); }
  Value Log(Value x) { return Unary(v1::OP_LOG, x); }
  Value Log2(Value x) { return Unary(v1::OP_LOG2, x); }
  Value Sqrt(Value x) { return Unary(v1::OP_SQRT, x); }
  Value Rsqrt(Value x) { return Unary(v1::OP_RSQRT, x); }
  Value Reciprocal(Value x) { return Unary(v1::OP_RECIPROCAL, x); }
  Value Sin(Value x) { return Unary(v1::OP_SIN, x); }
  Value Cos(Value x) { return Unary(v1::OP_COS, x); }
  Value Tanh(Value x) { return Unary(v1::OP_TANH, x); }
  Value Sigmoid(Value x) { return Unary(v1::OP_SIGMOID, x); }
  Value Relu(Value x) { return Unary(v1::OP_RELU, x); }
  Value Gelu(Value x) { return Unary(v1::OP_GELU_ERF, x); }
  Value GeluTanh(Value x) { return Unary(v1::OP_GELU_TANH, x); }
  Value Silu(Value x) { return Unary(v1::OP_SILU, x); }
  Value Softplus(Value x) { return Unary(v1::OP_SOFTPLUS, x); }
  Value Square(Value x) { return Unary(v1::OP_SQUARE, x); }
  Value Erf(Value x) { return Unary(v1::OP_ERF, x); }
  Value Floor(Value x) { return Unary(v1::OP_FLOOR, x); }
  Value Ceil(Value x) { return Unary(v1::OP_CEIL, x); }
  Value LogicalNot(Value x) { return Unary(v1::OP_LOGICAL_NOT, x); }

  Value Add(Value a, Value b) { return Binary(v1::OP_ADD, a, b); }
  Value Sub(Value a, Value b) { return Binary(v1::OP_SUB, a, b); }
  Value Mul(Value a, Value b) { return Binary(v1::OP_MUL, a, b); }
  Value Div(Value a, Value b) { return Binary(v1::OP_DIV, a, b); }
  Value Maximum(Value a, Value b) { return Binary(v1::OP_MAXIMUM, a, b); }
  Value Minimum(Value a, Value b) { return Binary(v1::OP_MINIMUM, a, b); }
  Value Pow(Value a, Value b) { return Binary(v1::OP_POW, a, b); }
  Value Eq(Value a, Value b) { return Binary(v1::OP_EQ, a, b); }
  Value Ne(Value a, Value b) { return Binary(v1::OP_NE, a, b); }
  Value Lt(Value a, Value b) { return Binary(v1::OP_LT, a, b); }
  Value Le(Value a, Value b) { return Binary(v1::OP_LE, a, b); }
  Value Gt(Value a, Value b) { return Binary(v1::OP_GT, a, b); }
  Value Ge(Value a, Value b) { return Binary(v1::OP_GE, a, b); }
  Value LogicalAnd(Value a, Value b) {
    return Binary(v1::OP_LOGICAL_AND, a, b);
  }
  Value LogicalOr(Value a, Value b) { return Binary(v1::OP_LOGICAL_OR, a, b); }
  // where(cond, a, b): a where cond is true.
  Value Where(Value cond, Value a, Value b) {
    return Append(OpOf(v1::OP_WHERE), {cond, a, b});
  }
  Value Cast(Value x, v1::DType dtype);
  // `act` applied to x (its op: RELU, SILU, GELU_ERF, GELU_TANH, SIGMOID,
  // TANH); x itself for kNone. A value outside the enum records an error
  // naming `activation`.
  Value Activate(Value x, Activation act);

  // The matrix product of the last two dims, batch dims broadcast.
  Value Matmul(Value a, Value b) { return Binary(v1::OP_MATMUL, a, b); }
  // x's dims reordered: result dim i is x's dim perm[i] (negative counts
  // from the end). The server checks that perm is a permutation of x's rank.
  Value Permute(Value x, std::vector<int32_t> perm);

  // x's elements, in row-major order, as `shape`. A dim that is neither a
  // size >= 0 nor a named symbol records an error naming it.
  Value Reshape(Value x, std::vector<v1::Dim> shape);
  // The index along `axis` (negative counts from the end) of a tensor of
  // `shape`, in `dtype`; the axis is written non-negative, as Python's.
  Value Iota(std::vector<v1::Dim> shape, int32_t axis,
             v1::DType dtype = v1::DTYPE_I32);

  // Reductions over `axis` (negative counts from the end).
  Value ReduceSum(Value x, int32_t axis = -1, bool keepdim = false) {
    return Reduce(v1::OP_REDUCE_SUM, x, axis, keepdim);
  }
  Value ReduceMax(Value x, int32_t axis = -1, bool keepdim = false) {
    return Reduce(v1::OP_REDUCE_MAX, x, axis, keepdim);
  }
  Value ReduceMin(Value x, int32_t axis = -1, bool keepdim = false) {
    return Reduce(v1::OP_REDUCE_MIN, x, axis, keepdim);
  }
  Value ReduceMean(Value x, int32_t axis = -1, bool keepdim = false) {
    return Reduce(v1::OP_REDUCE_MEAN, x, axis, keepdim);
  }
  Value Reduce(v1::OpKind kind, Value x, int32_t axis, bool keepdim);
  // Over several axes at once (one op), as Python's reductions over a tuple.
  Value Reduce(v1::OpKind kind, Value x, const std::vector<int32_t>& axes,
               bool keepdim);

  // The chain, or INVALID_ARGUMENT naming the field: the first error a call
  // recorded, no outputs, a duplicate output name. The builder stays usable.
  absl::StatusOr<v1::Chain> Build() const;

  // Records INVALID_ARGUMENT with `message` (which names the field) for
  // Build() to answer, as a bad call does; composites report bad options so.
  // The first error wins.
  void Invalid(std::string message) { Fail(std::move(message)); }

 private:
  static v1::Op OpOf(v1::OpKind kind) {
    v1::Op op;
    op.set_kind(kind);
    return op;
  }
  // Records the first error only: later ones usually follow from it.
  void Fail(std::string message);
  // OK if `v` is a value of this builder, else why not, naming `field`.
  absl::Status Check(const Value& v, absl::string_view field) const;
  Value Made(bool input, int index) const;

  uint64_t id_;
  v1::Chain chain_;
  absl::Status error_;
};

// ---------------------------------------------------------------------------
// Composites, expanded as the Python client's (clients/python/kfuse/chain.py).

struct SoftmaxOptions {
  int32_t axis = -1;
  std::optional<double> scale;  // x * scale first.
  std::optional<Value> bias;    // Then + bias.
  std::optional<Value> mask;    // Then -inf where the bool mask is false.
};

// softmax(x*scale + bias, masked) along `axis`, the row max subtracted first:
// [CONSTANT, MUL] [ADD] [CONSTANT -inf, WHERE] REDUCE_MAX SUB EXP REDUCE_SUM
// DIV, reductions with keepdim.
Value Softmax(ChainBuilder& b, Value x, const SoftmaxOptions& options = {});
// (x - max) - log(sum(exp(x - max))) along `axis`.
Value LogSoftmax(ChainBuilder& b, Value x, int32_t axis = -1);

// torch.nn.functional.layer_norm over the last dim:
// (x - mean) * rsqrt(mean((x - mean)^2) + eps) [* weight] [+ bias].
Value LayerNorm(ChainBuilder& b, Value x, std::optional<Value> weight = {},
                std::optional<Value> bias = {}, double eps = 1e-5);
// x * rsqrt(mean(x^2) + eps) [* weight] over the last dim.
Value RmsNorm(ChainBuilder& b, Value x, std::optional<Value> weight = {},
              double eps = 1e-6);

// The residual stream and its norm.
struct AddNorm {
  Value sum;     // x + residual.
  Value normed;  // norm(x + residual).
};
AddNorm AddRmsNorm(ChainBuilder& b, Value x, Value residual,
                   std::optional<Value> weight = {}, double eps = 1e-6);
AddNorm AddLayerNorm(ChainBuilder& b, Value x, Value residual,
                     std::optional<Value> weight = {},
                     std::optional<Value> bias = {}, double eps = 1e-5);

// torch.nn.functional.linear, then `act`: x @ weight^T [+ bias] [act(.)]:
// PERMUTE {1, 0} of the weight, MATMUL(x, that), [ADD bias], [the activation's
// op]. `weight` is [out, in] as torch.nn.Linear keeps it, and must be 2-D:
// the builder does not track ranks, so the transpose is the rank-2 one that
// Python's transpose (a swap of the last two dims) gives; x is [..., in] and
// bias [out]. The matmul kernel takes the bias and activation as its epilogue.
Value Linear(ChainBuilder& b, Value x, Value weight,
             std::optional<Value> bias = {},
             Activation act = Activation::kNone);

// An operand with its shape, for composites that reshape or broadcast it by
// its dims (the builder tracks no shapes): the dims it was declared with.
struct ShapedValue {
  Value value;
  std::vector<v1::Dim> shape;
};

// torch's losses' `reduction`.
enum class LossReduction { kNone, kSum, kMean };

// Integer class labels, one a row: i32, or i64 as torch holds them (read
// through a cast to i32).
struct Labels {
  Value value;
  v1::DType dtype = v1::DTYPE_I64;
};

struct ClassLossOptions {
  int64_t ignore_index = -100;  // Rows with this label lose nothing.
  LossReduction reduction = LossReduction::kMean;
};

// torch.nn.functional.cross_entropy of logits x (`shape` [..., C], float
// `dtype`) with class labels of x's shape without the last dim, expanded op
// for op as the Python client's `cross_entropy`:
//   [CAST labels to i32] RESHAPE to [..., 1], IOTA [C] (axis 0),
//   EQ(iota, column), CONSTANT 0, WHERE, REDUCE_SUM(-1)   (the pick)
//   REDUCE_MAX(-1, keepdim), SUB, EXP, REDUCE_SUM(-1), LOG, REDUCE_MAX(-1),
//   ADD (the log-sum-exp), CONSTANT ignore_index, NE (kept), SUB,
//   CONSTANT 0, WHERE (0 where ignored)
//   then the reduction: none; sum: CAST f32, REDUCE_SUM over every axis,
//   CAST to dtype; mean: the sum over the rows kept, divided by their count
//   (CAST f32, REDUCE_SUM; CAST kept f32, REDUCE_SUM; DIV; CAST to dtype).
// For one row (labels of rank 0) the "reductions" are the casts alone. The
// server picks each row's label with one read, not a comparison a column.
// A label outside [0, C) that is not ignore_index picks nothing (the loss
// is the row's log-sum-exp) where torch raises. Labels neither i32 nor i64,
// or an x of no dims, record INVALID_ARGUMENT for Build() and give an unset
// Value.
Value CrossEntropy(ChainBuilder& b, const ShapedValue& x, v1::DType dtype,
                   const Labels& labels, const ClassLossOptions& options = {});
// torch.nn.functional.nll_loss of log-probabilities, picked as
// CrossEntropy picks, the loss -pick: [CAST] RESHAPE, IOTA, EQ, CONSTANT 0,
// WHERE, REDUCE_SUM, CONSTANT ignore_index, NE, NEG, CONSTANT 0, WHERE, then
// the reduction as CrossEntropy's.
Value NllLoss(ChainBuilder& b, const ShapedValue& logp, v1::DType dtype,
              const Labels& labels, const ClassLossOptions& options = {});

// Scaled dot-product attention, as torch's SDPA, over q [batch..., heads,
// seq_q, head_dim], k [batch..., kv_heads, seq_k, head_dim] and v [batch...,
// kv_heads, seq_k, value_dim] (f16 or bf16). The builder does not track
// shapes, so the options say them; dims are static sizes >= 1 or symbols.
struct AttentionOptions {
  std::vector<v1::Dim> batch;  // The dims before the heads; may be none.
  int64_t heads = 0;
  std::optional<int64_t> kv_heads;  // Unset: heads. Must divide heads.
  v1::Dim seq_q;
  v1::Dim seq_k;
  int64_t head_dim = 0;
  std::optional<int64_t> value_dim;  // Unset: head_dim.
  bool causal = false;               // Key j <= query i, aligned at the start.
  std::optional<double> scale;       // Unset: 1/sqrt(head_dim).
  // Added to the scores [batch..., heads, seq_q, seq_k], to which it
  // broadcasts; with kv_heads < heads, a head dim (third from the end) must
  // be heads or 1.
  std::optional<ShapedValue> bias;
  // Bool, true where attention is allowed; broadcast as the bias.
  std::optional<ShapedValue> mask;
  // Integer, typically [batch...]: keys at or past a sequence's length are
  // masked. Reshaped to its dims followed by ones up to the scores' rank.
  std::optional<ShapedValue> lengths;
  bool return_lse = false;
};

struct AttentionResult {
  Value out;                 // [batch..., heads, seq_q, value_dim].
  std::optional<Value> lse;  // With return_lse: f32 [batch..., heads, seq_q].
};

// The expansion, op for op as the Python client's `attention`, which the
// server recognises and fuses into one kernel:
//   [RESHAPE q, k, v, bias, mask to [batch..., kv_heads, G or 1, ...] when
//    kv_heads < heads (G = heads / kv_heads); bias and mask only at rank >= 3]
//   PERMUTE k (last two dims), MATMUL(q, k^T), CONSTANT scale, MUL [ADD bias]
//   [IOTA columns [IOTA rows, LE] [RESHAPE lengths, LT], LOGICAL_AND of the
//    masks in the order mask, causal, lengths]  (causal or lengths)
//   [CONSTANT -inf, WHERE(allowed, s, -inf)]      (any mask)
//   REDUCE_MAX, SUB, EXP, REDUCE_SUM (keepdim, last axis), DIV
//   [CONSTANT -inf, EQ(max, -inf), CONSTANT 0, WHERE]  (mask, lengths or
//    bias: a fully masked row gives zeros, as SDPA)
//   MATMUL(p, v) [RESHAPE to [batch..., heads, seq_q, value_dim]]
//   [LOG(sum), ADD(max, it), CAST f32, RESHAPE to [batch..., heads, seq_q]]
// Symbols in the reshapes' and iotas' shapes are written by name only, as
// Python's. Bad options (a non-positive or unset dim, kv_heads that do not
// divide heads, a bias or mask whose head dim is neither heads nor 1 when
// kv_heads < heads, a non-finite scale) record INVALID_ARGUMENT naming the
// field, e.g. "attention.kv_heads", and give unset Values.
//
//   AttentionOptions o;
//   o.batch = {StaticDim(1)};
//   o.heads = 8;
//   o.kv_heads = 2;
//   o.seq_q = o.seq_k = SymbolDim("seq", /*hint=*/4096);
//   o.head_dim = 128;
//   o.causal = true;
//   o.return_lse = true;
//   AttentionResult r = Attention(b, q, k, v, o);
//   b.Output("out", r.out);
//   b.Output("lse", *r.lse);
AttentionResult Attention(ChainBuilder& b, Value q, Value k, Value v,
                          const AttentionOptions& options);

}  // namespace kfuse::client

#endif  // KFUSE_CLIENTS_CHAIN_BUILDER_H_
