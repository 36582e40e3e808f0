// The internal IR: a chain of operations as value types, free of protobuf.
// service/ translates a kfuse.v1.Chain into it; Validate() infers types and
// shapes; Canonicalize() and Hash() give equivalent chains one key; the
// partitioner and the generators read it.
//
//   Chain c;
//   int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(1024)}});
//   int y = c.AddOp(OpKind::kRelu, {x});
//   c.outputs.push_back(y);
//   absl::StatusOr<Chain> typed = Validate(c);
#ifndef KFUSE_CODEGEN_IR_H_
#define KFUSE_CODEGEN_IR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace kfuse {

// Values match kfuse.v1.OpKind, so the translator maps by cast after a
// range check. kInput is internal: inputs are nodes too.
enum class OpKind : uint16_t {
  kInvalid = 0,
  kConstant = 1,
  kInput = 2,
  kNeg = 10, kAbs, kExp, kExp2, kLog, kLog2, kSqrt, kRsqrt, kReciprocal, kSin,
  kCos, kTanh, kSigmoid, kRelu, kGeluErf, kGeluTanh, kSilu, kSoftplus, kSquare,
  kErf, kFloor, kCeil, kLogicalNot,
  kAdd = 40, kSub, kMul, kDiv, kMaximum, kMinimum, kPow, kEq, kNe, kLt, kLe,
  kGt, kGe, kLogicalAnd, kLogicalOr,
  kWhere = 60,
  kCast = 61,
  kReduceSum = 70, kReduceMax, kReduceMin, kReduceMean,
  kReshape = 80, kPermute, kExpand, kSlice, kConcat, kIota,
  kMatmul = 90,
};

// "relu", "add", ...: stable names for messages, golden tests and hashing.
std::string_view OpName(OpKind k);
bool IsKnownOp(OpKind k);
bool IsUnary(OpKind k);       // kNeg .. kLogicalNot.
bool IsBinary(OpKind k);      // kAdd .. kLogicalOr.
bool IsElementwise(OpKind k); // Unary, binary, where, cast, constant.
bool IsReduction(OpKind k);
bool IsLayout(OpKind k);
bool IsCommutative(OpKind k);
bool IsComparison(OpKind k);  // Result is bool.
// Operand count, or -1 for variadic (concat).
int Arity(OpKind k);

// A static size, or a runtime size named by symbol index (Chain::symbols).
struct Dim {
  int64_t size = 0;     // Static size when symbol < 0.
  int32_t symbol = -1;  // Index into Chain::symbols.

  static Dim Static(int64_t n) { return Dim{n, -1}; }
  static Dim Sym(int32_t s) { return Dim{0, s}; }
  bool is_static() const { return symbol < 0; }
  friend bool operator==(const Dim& a, const Dim& b) {
    return a.size == b.size && a.symbol == b.symbol;
  }
  friend bool operator!=(const Dim& a, const Dim& b) { return !(a == b); }
};

struct TensorType {
  DType dtype = DType::kInvalid;
  std::vector<Dim> shape;  // Empty: a scalar.
  int rank() const { return static_cast<int>(shape.size()); }
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
};

// A runtime size the client named. The name is client text: it is kept for
// messages and the plan's symbol table, and never reaches generated source.
struct SymbolInfo {
  std::string name;
  int64_t hint = 0;  // Expected size (tuning bucket); 0: unknown.
  int64_t max = 0;   // Known upper bound; 0: unknown.
};

// One value of the chain. Inputs and constants are nodes too, so every
// operand is a node id.
struct Node {
  OpKind kind = OpKind::kInvalid;
  std::vector<int32_t> args;  // Earlier node ids.
  TensorType type;            // Inputs: as declared. Others: set by Validate.

  // Attributes; each op reads only its own.
  int32_t input_index = -1;           // kInput: position among chain inputs.
  std::vector<int64_t> strides;       // kInput: element strides; empty = dense.
  // kInput of a plan's kernel seen as a chain of its own (Isolate) that is
  // a slice of a chain input read in place: the element offset of its
  // element 0 in that input's buffer. 0 for a client's inputs.
  int64_t offset = 0;
  // kInput of a plan's kernel seen as a chain of its own (Isolate) that is
  // an earlier kernel's result: the element type of its buffer
  // (IntermediateDType: f32 for a 16-bit reduction). kInvalid: a chain
  // input, its buffer of type.dtype.
  DType storage = DType::kInvalid;
  DType dtype = DType::kInvalid;      // kCast, kConstant, kIota: the target type.
  double value = 0;                   // kConstant.
  // kConstant without a dtype, set by Validate: a whole number outside i32
  // (a Python int) as the client gave it; `value` holds it rounded to f32.
  // PyTorch keeps such a scalar an integer, so an op computing in integers
  // cannot take it. Weak arithmetic of one whose exact value is such a
  // number (-(2**40)) becomes such a constant in Validate.
  std::optional<double> wide_whole;
  std::vector<int64_t> axes;          // Reductions (sorted, non-negative after
                                      // Validate), kPermute (the permutation).
  bool keepdim = false;               // Reductions.
  std::vector<Dim> shape;             // kReshape, kExpand, kIota.
  int64_t axis = 0;                   // kSlice, kConcat, kIota.
  int64_t start = 0, stop = 0, step = 1;  // kSlice.

  // Wire position of the op, for messages ("op 3"); -1 for inputs.
  int32_t wire_index = -1;
};

// The element type of an input's buffer: Node::storage, else its dtype.
inline DType StorageDType(const Node& n) {
  return n.storage != DType::kInvalid ? n.storage : n.type.dtype;
}

struct Chain {
  std::vector<SymbolInfo> symbols;
  std::vector<Node> nodes;
  std::vector<int32_t> outputs;            // Node ids, in the client's order.
  std::vector<std::string> input_names;    // Client text, for messages.
  std::vector<std::string> output_names;   // Client text, for messages.

  int num_inputs() const;
  // Builders for tests and client helpers; return the new node id.
  int32_t AddInput(TensorType type, std::vector<int64_t> strides = {});
  int32_t AddOp(OpKind kind, std::vector<int32_t> args);
  int32_t AddConstant(double value, DType dtype = DType::kInvalid);
  int32_t AddCast(int32_t arg, DType to);
};

// A human-readable listing, one node a line ("%3 = mul(%1, %2) : bf16[N,4096]").
std::string ToString(const Chain& c);

// True when node `id` is a chain input seen through permutes, expands and
// reshapes alone (or the input itself): what a matmul kernel can read as
// strides of the input's buffer rather than as another kernel's result.
bool IsViewOfInput(const Chain& c, int32_t id);

// How messages name node `id` of a validated chain: "op 3 (reduce_sum)",
// numbered as the client's ops are; an input is "inputs[1]".
std::string OpLabel(const Chain& c, int32_t id);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_IR_H_
