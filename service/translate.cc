#include "service/translate.h"

#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse {
namespace {

// Arguments per op beyond any real use (concat of many parts).
constexpr int kMaxArgs = 1024;

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Client text echoed in every plan and error: bounded, so a request's
// answer stays near its size.
absl::Status CheckNameLength(const std::string& field, const std::string& name) {
  if (static_cast<int64_t>(name.size()) <= Limits{}.max_name_bytes) return absl::OkStatus();
  return Bad(field, absl::StrCat("a name of ", name.size(), " bytes; at most ", Limits{}.max_name_bytes));
}

// Interns symbols by name; a later mention may add a hint or a max the
// first did not give, but not contradict it.
class SymbolTable {
 public:
  SymbolTable(Chain* chain, int max_symbols) : chain_(chain), max_symbols_(max_symbols) {}

  absl::StatusOr<Dim> Translate(const v1::Dim& d, const std::string& field) {
    switch (d.kind_case()) {
      case v1::Dim::kSize:
        if (d.hint() != 0 || d.max() != 0) return Bad(field, "hint and max belong to symbolic dims");
        return Dim::Static(d.size());
      case v1::Dim::kSymbol:
        break;
      case v1::Dim::KIND_NOT_SET:
        return Bad(field, "a dim needs a size or a symbol");
    }
    if (d.symbol().empty()) return Bad(field, "symbol must not be empty");
    KFUSE_RETURN_IF_ERROR(CheckNameLength(field, d.symbol()));
    auto [it, inserted] = index_.emplace(d.symbol(), static_cast<int32_t>(chain_->symbols.size()));
    if (inserted) {
      if (static_cast<int>(chain_->symbols.size()) >= max_symbols_) {
        return Bad(field, absl::StrCat("more than ", max_symbols_, " symbols"));
      }
      chain_->symbols.push_back(SymbolInfo{d.symbol(), 0, 0});
    }
    SymbolInfo& s = chain_->symbols[it->second];
    KFUSE_RETURN_IF_ERROR(Merge(field, "hint", d.hint(), &s.hint));
    KFUSE_RETURN_IF_ERROR(Merge(field, "max", d.max(), &s.max));
    return Dim::Sym(it->second);
  }

  absl::StatusOr<std::vector<Dim>> TranslateAll(
      const google::protobuf::RepeatedPtrField<v1::Dim>& dims, const std::string& field) {
    std::vector<Dim> out;
    out.reserve(dims.size());
    for (int i = 0; i < dims.size(); ++i) {
      KFUSE_ASSIGN_OR_RETURN(Dim d, Translate(dims[i], absl::StrCat(field, "[", i, "]")));
      out.push_back(d);
    }
    return out;
  }

 private:
  static absl::Status Merge(const std::string& field, absl::string_view what, int64_t value,
                            int64_t* slot) {
    if (value == 0) return absl::OkStatus();
    if (value < 0) return Bad(field, absl::StrCat(what, " must not be negative, got ", value));
    // Past the element limit no tensor has this size; the roofline's
    // arithmetic on it would overflow.
    if (value > Limits{}.max_elements) {
      return Bad(field, absl::StrCat(what, " ", value, " exceeds the limit of ", Limits{}.max_elements,
                                     " elements"));
    }
    if (*slot != 0 && *slot != value) {
      return Bad(field, absl::StrCat("symbol ", what, " ", value, " conflicts with ", *slot,
                                     " given earlier"));
    }
    *slot = value;
    return absl::OkStatus();
  }

  Chain* chain_;
  int max_symbols_;
  std::unordered_map<std::string, int32_t> index_;
};

// Names are how clients tell inputs (and outputs) apart in plans and
// errors: a non-empty one may appear once. Client text: quoted, cut.
absl::Status CheckUniqueName(const std::vector<std::string>& earlier, const std::string& name,
                             absl::string_view list, int index) {
  KFUSE_RETURN_IF_ERROR(CheckNameLength(absl::StrCat(list, "[", index, "].name"), name));
  if (name.empty()) return absl::OkStatus();
  for (size_t j = 0; j < earlier.size(); ++j) {
    if (earlier[j] == name) {
      return Bad(absl::StrCat(list, "[", index, "].name"),
                 absl::StrCat("name ", validate_internal::Quote(name), " repeats ", list, "[", j, "].name"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DType> TranslateDType(int value, const std::string& field) {
  if (!v1::DType_IsValid(value)) {
    return Bad(field, absl::StrCat("unknown dtype ", value));
  }
  return static_cast<DType>(value);
}

// Ref -> node id, checking that it names an input or an earlier op.
absl::StatusOr<int32_t> TranslateRef(const v1::Ref& r, int num_inputs, int num_ops_before,
                                     const std::string& field) {
  switch (r.kind_case()) {
    case v1::Ref::kInput:
      if (r.input() >= static_cast<uint32_t>(num_inputs)) {
        return Bad(field, absl::StrCat("input ", r.input(), " does not exist (the chain has ",
                                       num_inputs, num_inputs == 1 ? " input)" : " inputs)"));
      }
      return static_cast<int32_t>(r.input());
    case v1::Ref::kOp:
      if (r.op() >= static_cast<uint32_t>(num_ops_before)) {
        return Bad(field, absl::StrCat("op ", r.op(),
                                       " is not an earlier op (forward or dangling "
                                       "reference; ops are in topological order)"));
      }
      return static_cast<int32_t>(num_inputs + r.op());
    case v1::Ref::KIND_NOT_SET:
      break;
  }
  return Bad(field, "reference must name an input or an op");
}

// An attribute `kind` does not read is refused, not ignored: a reduction
// whose axes were put in `axis` would otherwise reduce every axis, and a
// client's mistake would pass as another chain.
absl::Status CheckAttributes(const v1::Op& op, OpKind kind, const std::string& field) {
  const bool reduction = kind == OpKind::kReduceSum || kind == OpKind::kReduceMax ||
                         kind == OpKind::kReduceMin || kind == OpKind::kReduceMean;
  struct Attribute {
    const char* name;
    bool set;
    bool read;
  };
  const Attribute attributes[] = {
      {"dtype", op.dtype() != v1::DTYPE_UNSPECIFIED,
       kind == OpKind::kConstant || kind == OpKind::kCast || kind == OpKind::kIota},
      {"value", op.value() != 0 || std::signbit(op.value()), kind == OpKind::kConstant},  // -0.0 is sent.
      {"weak_float", op.weak_float(), kind == OpKind::kConstant},
      {"reduce", op.has_reduce(), reduction},
      {"shape", op.has_shape(), kind == OpKind::kReshape || kind == OpKind::kExpand || kind == OpKind::kIota},
      {"permute", op.has_permute(), kind == OpKind::kPermute},
      {"slice", op.has_slice(), kind == OpKind::kSlice},
      {"axis", op.has_axis(), kind == OpKind::kIota || kind == OpKind::kConcat},
  };
  for (const Attribute& a : attributes) {
    if (a.set && !a.read) {
      return Bad(absl::StrCat(field, ".", a.name), absl::StrCat(std::string(OpName(kind)), " takes no ", a.name));
    }
  }
  return absl::OkStatus();
}

absl::Status TranslateOp(const v1::Op& op, int j, int num_inputs, SymbolTable& symbols, Node* n) {
  std::string field = absl::StrCat("ops[", j, "]");
  int kind = op.kind();
  if (kind == v1::OP_UNSPECIFIED) return Bad(field + ".kind", "op kind must be set");
  if (!v1::OpKind_IsValid(kind) || !IsKnownOp(static_cast<OpKind>(kind)) ||
      static_cast<OpKind>(kind) == OpKind::kInput) {
    return Bad(field + ".kind", absl::StrCat("unknown op kind ", kind));
  }
  n->kind = static_cast<OpKind>(kind);
  n->wire_index = j;
  KFUSE_RETURN_IF_ERROR(CheckAttributes(op, n->kind, field));
  if (op.args_size() > kMaxArgs) {
    return Bad(field + ".args", absl::StrCat("more than ", kMaxArgs, " operands"));
  }
  for (int i = 0; i < op.args_size(); ++i) {
    KFUSE_ASSIGN_OR_RETURN(
        int32_t id, TranslateRef(op.args(i), num_inputs, j, absl::StrCat(field, ".args[", i, "]")));
    n->args.push_back(id);
  }
  switch (n->kind) {
    case OpKind::kConstant:
    case OpKind::kCast: {
      n->value = n->kind == OpKind::kConstant ? op.value() : 0;
      KFUSE_ASSIGN_OR_RETURN(n->dtype, TranslateDType(op.dtype(), field + ".dtype"));
      // A weak float keeps its kind whatever its value: typed f32 here, as
      // validation types a weak scalar with a fraction.
      if (n->kind == OpKind::kConstant && op.weak_float() && n->dtype == DType::kInvalid) {
        n->type.dtype = DType::kF32;
      }
      break;
    }
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceMean:
      n->axes.assign(op.reduce().axes().begin(), op.reduce().axes().end());
      n->keepdim = op.reduce().keepdim();
      break;
    case OpKind::kPermute:
      n->axes.assign(op.permute().perm().begin(), op.permute().perm().end());
      break;
    case OpKind::kReshape:
    case OpKind::kExpand:
    case OpKind::kIota: {
      KFUSE_ASSIGN_OR_RETURN(n->shape,
                             symbols.TranslateAll(op.shape().shape(), field + ".shape.shape"));
      if (n->kind == OpKind::kIota) {
        KFUSE_ASSIGN_OR_RETURN(n->dtype, TranslateDType(op.dtype(), field + ".dtype"));
        n->axis = op.axis().axis();
      }
      break;
    }
    case OpKind::kSlice:
      n->axis = op.slice().axis();
      n->start = op.slice().start();
      n->stop = op.slice().stop();
      n->step = op.slice().step() == 0 ? 1 : op.slice().step();
      break;
    case OpKind::kConcat:
      n->axis = op.axis().axis();
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Chain> TranslateChain(const v1::Chain& proto, const Limits& limits) {
  if (proto.ops_size() > limits.max_ops) {
    return Bad("ops", absl::StrCat("the chain has ", proto.ops_size(), " ops; the limit is ",
                                   limits.max_ops));
  }
  if (proto.inputs_size() > limits.max_inputs) {
    return Bad("inputs", absl::StrCat("the chain has ", proto.inputs_size(),
                                      " inputs; the limit is ", limits.max_inputs));
  }
  if (proto.outputs_size() > limits.max_outputs) {
    return Bad("outputs", absl::StrCat("the chain has ", proto.outputs_size(),
                                       " outputs; the limit is ", limits.max_outputs));
  }
  Chain c;
  SymbolTable symbols(&c, limits.max_symbols);
  const int num_inputs = proto.inputs_size();
  c.nodes.reserve(num_inputs + proto.ops_size());
  for (int i = 0; i < num_inputs; ++i) {
    const v1::TensorSpec& in = proto.inputs(i);
    std::string field = absl::StrCat("inputs[", i, "]");
    if (in.shape_size() > limits.max_rank) {
      return Bad(field + ".shape",
                 absl::StrCat("rank ", in.shape_size(), " exceeds the limit of ", limits.max_rank));
    }
    if (in.dtype() == v1::DTYPE_UNSPECIFIED) return Bad(field + ".dtype", "dtype must be set");
    KFUSE_ASSIGN_OR_RETURN(DType dtype, TranslateDType(in.dtype(), field + ".dtype"));
    KFUSE_ASSIGN_OR_RETURN(std::vector<Dim> shape,
                           symbols.TranslateAll(in.shape(), field + ".shape"));
    c.AddInput(TensorType{dtype, std::move(shape)},
               std::vector<int64_t>(in.strides().begin(), in.strides().end()));
    KFUSE_RETURN_IF_ERROR(CheckUniqueName(c.input_names, in.name(), "inputs", i));
    c.input_names.push_back(in.name());
  }
  for (int j = 0; j < proto.ops_size(); ++j) {
    Node n;
    KFUSE_RETURN_IF_ERROR(TranslateOp(proto.ops(j), j, num_inputs, symbols, &n));
    c.nodes.push_back(std::move(n));
  }
  for (int k = 0; k < proto.outputs_size(); ++k) {
    const v1::Output& out = proto.outputs(k);
    std::string field = absl::StrCat("outputs[", k, "].value");
    if (!out.has_value()) return Bad(field, "an output must name a value");
    KFUSE_ASSIGN_OR_RETURN(int32_t id,
                           TranslateRef(out.value(), num_inputs, proto.ops_size(), field));
    c.outputs.push_back(id);
    KFUSE_RETURN_IF_ERROR(CheckUniqueName(c.output_names, out.name(), "outputs", k));
    c.output_names.push_back(out.name());
  }
  return Validate(std::move(c), limits);
}

}  // namespace kfuse
