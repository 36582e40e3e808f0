#include "codegen/validate.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse {
namespace validate_internal {

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  size_t n = 0;
  for (char ch : s) {
    if (n++ == 64) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u >= 0x7f) {
      out += absl::StrFormat("\\x%02x", u);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string NodeLabel(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  if (n.kind == OpKind::kInput) {
    // An earlier kernel's result, in a kernel's own chain (Isolate): its name
    // is the label of the op it is.
    if (n.storage != DType::kInvalid && n.input_index >= 0 &&
        n.input_index < static_cast<int>(c.input_names.size())) {
      return c.input_names[n.input_index];
    }
    std::string label = absl::StrCat("inputs[", n.input_index, "]");
    if (n.input_index >= 0 && n.input_index < static_cast<int>(c.input_names.size()) &&
        !c.input_names[n.input_index].empty()) {
      absl::StrAppend(&label, " (", Quote(c.input_names[n.input_index]), ")");
    }
    return label;
  }
  int32_t index = n.wire_index;
  if (index < 0) {
    index = 0;
    for (int32_t i = 0; i < id; ++i) index += c.nodes[i].kind != OpKind::kInput;
  }
  std::string_view name = OpName(n.kind);
  if (name == "unknown") {
    return absl::StrCat("op ", index, " (kind ", static_cast<int>(n.kind), ")");
  }
  return absl::StrCat("op ", index, " (", std::string(name), ")");
}

std::string ShapeString(const Chain& c, const std::vector<Dim>& dims) {
  // Messages stay short whatever the client sent: at most the first 8 dims.
  constexpr size_t kShown = 8;
  if (dims.size() > kShown) {
    return absl::StrCat(ShapeString(c, std::vector<Dim>(dims.begin(), dims.begin() + kShown)), "... (",
                        dims.size(), " dims)");
  }
  return absl::StrCat(
      "[",
      absl::StrJoin(dims, ",",
                    [&c](std::string* out, const Dim& d) {
                      if (d.is_static()) {
                        absl::StrAppend(out, d.size);
                      } else if (d.symbol < static_cast<int32_t>(c.symbols.size())) {
                        absl::StrAppend(out, Quote(c.symbols[d.symbol].name));
                      } else {
                        absl::StrAppend(out, "s", d.symbol);
                      }
                    }),
      "]");
}

absl::Status Bad(const Chain& c, int32_t id, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(NodeLabel(c, id), ": ", field, field.empty() ? "" : ": ", what));
}

absl::Status Unsupported(const Chain& c, int32_t id, absl::string_view field,
                         absl::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat(NodeLabel(c, id), ": ", field, field.empty() ? "" : ": ", what));
}

bool IsKnownDType(DType t) { return t >= DType::kF32 && t <= DType::kF64; }

bool IsComputeDType(DType t) { return IsKnownDType(t) && t != DType::kF64; }

bool Broadcast(const std::vector<Dim>& a, const std::vector<Dim>& b, std::vector<Dim>* out) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<Dim> r(rank);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim::Static(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim::Static(1) : b[i - (rank - b.size())];
    if (da == db || db == Dim::Static(1)) {
      r[i] = da;
    } else if (da == Dim::Static(1)) {
      r[i] = db;
    } else {
      return false;
    }
  }
  *out = std::move(r);
  return true;
}

absl::Status CheckDims(const Chain& c, int32_t id, absl::string_view field,
                       const std::vector<Dim>& dims) {
  // The rank first: a shape of thousands of dims is refused in a line, not
  // compared (and printed) whole.
  if (static_cast<int>(dims.size()) > Limits{}.max_rank) {
    return Bad(c, id, field, absl::StrCat("rank ", dims.size(), " exceeds the limit of ", Limits{}.max_rank));
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = dims[i];
    std::string f = absl::StrCat(field, "[", i, "]");
    if (d.is_static() && d.size <= 0) {
      return Bad(c, id, f, absl::StrCat("size must be positive, got ", d.size));
    }
    if (!d.is_static() && d.symbol >= static_cast<int32_t>(c.symbols.size())) {
      return Bad(c, id, f, absl::StrCat("unknown symbol ", d.symbol));
    }
  }
  return absl::OkStatus();
}

}  // namespace validate_internal

int64_t CountElementsAt(const std::vector<Dim>& dims, const std::vector<int64_t>& sizes, int64_t limit) {
  int64_t n = 1;
  for (const Dim& d : dims) {
    const int64_t s = d.is_static() ? d.size : sizes[d.symbol];
    if (s > 0 && n > limit / s) return limit + 1;
    n *= s;
  }
  return n;
}

int64_t CountElements(const Chain& c, const std::vector<Dim>& dims, int64_t limit) {
  std::vector<int64_t> at_max;
  for (const SymbolInfo& s : c.symbols) at_max.push_back(std::max<int64_t>(s.max, 1));
  return CountElementsAt(dims, at_max, limit);
}

namespace {

using namespace validate_internal;  // NOLINT: this file implements them.

absl::Status CheckTypeLimits(const Chain& c, int32_t id, const Limits& limits) {
  const TensorType& t = c.nodes[id].type;
  if (t.rank() > limits.max_rank) {
    return Bad(c, id, "shape",
               absl::StrCat("rank ", t.rank(), " exceeds the limit of ", limits.max_rank));
  }
  if (CountElements(c, t.shape, limits.max_elements) > limits.max_elements) {
    // A symbol counts at its declared max (one without counts as 1): say
    // which, or a generous max reads as a mystery.
    std::vector<std::string> at_max;
    for (const Dim& d : t.shape) {
      if (d.is_static() || c.symbols[d.symbol].max <= 0) continue;
      std::string named = absl::StrCat(Quote(c.symbols[d.symbol].name), " at its max ", c.symbols[d.symbol].max);
      if (std::find(at_max.begin(), at_max.end(), named) == at_max.end()) at_max.push_back(named);
    }
    return Bad(c, id, "shape",
               absl::StrCat("more than ", limits.max_elements, " elements in ", ShapeString(c, t.shape),
                            at_max.empty() ? "" : absl::StrCat(" with ", absl::StrJoin(at_max, ", "))));
  }
  // The tuner times a chain at its symbols' hints, so they are held to the
  // same bound as static sizes.
  int64_t at_hints = 1;
  for (const Dim& d : t.shape) {
    const int64_t s = d.is_static() ? d.size : std::max<int64_t>(c.symbols[d.symbol].hint, 1);
    if (s > 0 && at_hints > limits.max_elements / s) {
      return Bad(c, id, "shape",
                 absl::StrCat("more than ", limits.max_elements, " elements in ", ShapeString(c, t.shape),
                              " at the symbols' hints"));
    }
    at_hints *= s;
  }
  return absl::OkStatus();
}

// Every symbol is a dim of some input: the launcher reads its value there,
// so a symbol that only an op's shape names (an expand, an iota) would give
// a plan no client can launch.
absl::Status CheckSymbolSources(const Chain& c) {
  std::vector<bool> sourced(c.symbols.size(), false);
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    for (const Dim& d : n.type.shape) {
      if (!d.is_static()) sourced[d.symbol] = true;
    }
  }
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    for (const Dim& d : c.nodes[id].type.shape) {
      if (!d.is_static() && !sourced[d.symbol]) {
        return Bad(c, id, "shape",
                   absl::StrCat("symbol ", Quote(c.symbols[d.symbol].name),
                                " is no dim of any input, so nothing gives its size at launch"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSymbols(const Chain& c, const Limits& limits) {
  if (static_cast<int>(c.symbols.size()) > limits.max_symbols) {
    return absl::InvalidArgumentError(absl::StrCat("chain has ", c.symbols.size(),
                                                   " symbols; the limit is ", limits.max_symbols));
  }
  for (size_t i = 0; i < c.symbols.size(); ++i) {
    const SymbolInfo& s = c.symbols[i];
    std::string label = absl::StrCat("symbols[", i, "] (", Quote(s.name), ")");
    if (s.hint < 0 || s.max < 0) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": hint and max must not be negative"));
    }
    if (s.max > 0 && s.hint > s.max) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": hint ", s.hint, " exceeds max ", s.max));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckInput(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  if (n.input_index != id) {
    return Bad(c, id, "", "inputs must be the first nodes, in input_index order");
  }
  if (!IsKnownDType(n.type.dtype)) {
    return Bad(c, id, "dtype",
               n.type.dtype == DType::kInvalid
                   ? std::string("dtype must be set")
                   : absl::StrCat("unknown dtype ", static_cast<int>(n.type.dtype)));
  }
  if (!IsComputeDType(n.type.dtype)) {
    return Unsupported(c, id, "dtype",
                       absl::StrCat("dtype ", std::string(DTypeName(n.type.dtype)),
                                    " not supported by element-wise ops"));
  }
  KFUSE_RETURN_IF_ERROR(CheckDims(c, id, "shape", n.type.shape));
  if (!n.strides.empty()) {
    if (n.strides.size() != n.type.shape.size()) {
      return Bad(c, id, "strides",
                 absl::StrCat("has ", n.strides.size(), n.strides.size() == 1 ? " entry" : " entries", " for rank ",
                              n.type.rank()));
    }
    // The furthest element a stride reaches must stay inside the element
    // limit (the buffer spans it), so index arithmetic can never overflow. A symbol counts at its
    // max, or at its hint where it has none (1 without either), as the
    // tuner sizes it.
    const int64_t limit = Limits{}.max_elements;
    int64_t extent = 0;
    for (size_t i = 0; i < n.strides.size(); ++i) {
      if (n.strides[i] < 0) {
        return Bad(c, id, absl::StrCat("strides[", i, "]"),
                   absl::StrCat("must not be negative, got ", n.strides[i]));
      }
      const Dim& d = n.type.shape[i];
      const SymbolInfo* s = d.is_static() ? nullptr : &c.symbols[d.symbol];
      const int64_t size = s == nullptr ? d.size : std::max({s->max, s->hint, int64_t{1}});
      int64_t reach = 0;
      if (n.strides[i] > limit || __builtin_mul_overflow(n.strides[i], size - 1, &reach) ||
          __builtin_add_overflow(extent, reach, &extent) || extent >= limit) {
        return Bad(c, id, absl::StrCat("strides[", i, "]"),
                   absl::StrCat("reaches past ", limit, " elements"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckArgs(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  if (!IsKnownOp(n.kind) || n.kind == OpKind::kInput) {
    return Bad(c, id, "kind", absl::StrCat("unknown op kind ", static_cast<int>(n.kind)));
  }
  int arity = Arity(n.kind);
  if (arity >= 0 && static_cast<int>(n.args.size()) != arity) {
    return Bad(
        c, id, "args",
        absl::StrCat("takes ", arity, " operand", arity == 1 ? "" : "s", ", got ", n.args.size()));
  }
  if (arity < 0 && n.args.empty()) return Bad(c, id, "args", "takes at least one operand");
  for (size_t i = 0; i < n.args.size(); ++i) {
    int32_t a = n.args[i];
    if (a < 0 || a >= static_cast<int32_t>(c.nodes.size())) {
      return Bad(c, id, absl::StrCat("args[", i, "]"),
                 absl::StrCat("refers to no value (", a, ")"));
    }
    if (a >= id) {
      return Bad(c, id, absl::StrCat("args[", i, "]"),
                 absl::StrCat("forward reference to ", NodeLabel(c, a),
                              "; ops must come after their operands"));
    }
  }
  return absl::OkStatus();
}

absl::Status InferNode(Chain& c, int32_t id) {
  OpKind k = c.nodes[id].kind;
  if (IsElementwise(k)) return InferElementwise(c, id);
  if (IsReduction(k)) return InferReduction(c, id);
  if (IsLayout(k)) return InferLayout(c, id);
  if (k == OpKind::kMatmul) return InferMatmul(c, id);
  return Bad(c, id, "kind", absl::StrCat("unknown op kind ", static_cast<int>(k)));
}

}  // namespace

absl::StatusOr<Chain> Validate(Chain c, const Limits& limits) {
  int num_inputs = c.num_inputs();
  int num_ops = static_cast<int>(c.nodes.size()) - num_inputs;
  if (num_ops == 0 && c.outputs.empty()) {
    return absl::InvalidArgumentError("ops, outputs: the chain is empty (no ops and no outputs)");
  }
  if (c.outputs.empty()) return absl::InvalidArgumentError("outputs: the chain has none");
  if (num_ops > limits.max_ops) {
    return absl::InvalidArgumentError(
        absl::StrCat("chain has ", num_ops, " ops; the limit is ", limits.max_ops));
  }
  if (num_inputs > limits.max_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("chain has ", num_inputs, " inputs; the limit is ", limits.max_inputs));
  }
  if (static_cast<int>(c.outputs.size()) > limits.max_outputs) {
    return absl::InvalidArgumentError(absl::StrCat("chain has ", c.outputs.size(),
                                                   " outputs; the limit is ", limits.max_outputs));
  }
  KFUSE_RETURN_IF_ERROR(CheckSymbols(c, limits));

  int64_t concat_operands = 0;
  IntegerRanges ranges(c);
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (c.nodes[id].kind == OpKind::kInput) {
      KFUSE_RETURN_IF_ERROR(CheckInput(c, id));
    } else {
      if (c.nodes[id].kind == OpKind::kConcat &&
          (concat_operands += c.nodes[id].args.size()) > limits.max_concat_operands) {
        return Bad(c, id, "args",
                   absl::StrCat("the chain's concats take ", concat_operands, " operands up to here; the limit is ",
                                limits.max_concat_operands, " in all"));
      }
      KFUSE_RETURN_IF_ERROR(CheckArgs(c, id));
      KFUSE_RETURN_IF_ERROR(InferNode(c, id));
    }
    KFUSE_RETURN_IF_ERROR(CheckTypeLimits(c, id, limits));
    KFUSE_RETURN_IF_ERROR(ranges.Check(id));
  }
  KFUSE_RETURN_IF_ERROR(CheckSymbolSources(c));

  for (size_t i = 0; i < c.outputs.size(); ++i) {
    int32_t o = c.outputs[i];
    if (o < 0 || o >= static_cast<int32_t>(c.nodes.size())) {
      std::string label = absl::StrCat("outputs[", i, "]");
      if (i < c.output_names.size() && !c.output_names[i].empty()) {
        absl::StrAppend(&label, " (", Quote(c.output_names[i]), ")");
      }
      return absl::InvalidArgumentError(absl::StrCat(label, ": refers to no value (", o, ")"));
    }
  }
  return c;
}

}  // namespace kfuse
