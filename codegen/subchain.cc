#include "codegen/subchain.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/pointwise_views.h"
#include "codegen/validate.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse {

namespace {

// Reshape `id` of an InputView as one: static dims, strides as the
// pointwise views reshape them (a merged group evenly spaced), the last dim
// wider than 1 at stride 1 (the rows' vectors); else nullopt.
std::optional<InputView> ReshapedView(const Chain& chain, int32_t id) {
  const Node& n = chain.nodes[id];
  std::optional<InputView> v = AsInputView(chain, n.args[0]);
  if (!v) return std::nullopt;
  const std::vector<Dim>& from = chain.nodes[n.args[0]].type.shape;
  const std::vector<Dim>& to = n.type.shape;
  auto is_static = [](const Dim& d) { return d.is_static(); };
  if (!std::all_of(from.begin(), from.end(), is_static) || !std::all_of(to.begin(), to.end(), is_static)) {
    return std::nullopt;
  }
  std::vector<Mono> strides;
  for (int64_t st : v->strides) strides.push_back(Mono{st, {}});
  absl::StatusOr<std::vector<Mono>> st = pointwise_internal::ReshapeStrides(chain, id, from, to, std::move(strides));
  if (!st.ok()) return std::nullopt;
  InputView out;
  out.input = v->input;
  out.offset = v->offset;
  for (const Mono& m : *st) out.strides.push_back(m.coef);
  // Rows at unit stride; a trailing unit dim (a per-row value's) is the row
  // kernels' own reshape, not read in place.
  if (to.empty() || to.back().size == 1 || out.strides.back() != 1) return std::nullopt;
  return out;
}

}  // namespace

std::optional<InputView> AsInputView(const Chain& chain, int32_t id) {
  const Node& n = chain.nodes[id];
  if (n.kind == OpKind::kInput) {
    InputView v;
    v.input = id;
    v.strides = n.strides;
    if (v.strides.empty()) {  // Dense: static strides where the inner dims are.
      v.strides.assign(n.type.rank(), 1);
      for (int d = n.type.rank() - 1; d > 0; --d) {
        if (!n.type.shape[d].is_static()) return std::nullopt;
        v.strides[d - 1] = v.strides[d] * n.type.shape[d].size;
      }
    }
    return v;
  }
  if (n.kind == OpKind::kReshape) return ReshapedView(chain, id);
  if (n.kind != OpKind::kSlice || (n.axis == n.type.rank() - 1 && n.step != 1)) return std::nullopt;
  std::optional<InputView> v = AsInputView(chain, n.args[0]);
  if (!v) return std::nullopt;
  v->offset += n.start * v->strides[n.axis];
  // A dim the slice leaves one element is never stepped over, whatever its
  // step (one past 2^62 would overflow the stride): stride 0 where the step
  // would scale it.
  const Dim& kept = n.type.shape[n.axis];
  if (n.step != 1) {
    if (kept.is_static() && kept.size == 1) {
      v->strides[n.axis] = 0;
    } else if (__builtin_mul_overflow(v->strides[n.axis], n.step, &v->strides[n.axis])) {
      return std::nullopt;
    }
  }
  return v;
}

bool ReadInPlace(const Chain& chain, int32_t id) {
  const Node& n = chain.nodes[id];
  if (!IsInputViewStep(n.kind) || n.type.rank() == 0) return false;
  if (!AsInputView(chain, id)) return false;
  // An output is written, not read; a slice it takes of a slice that
  // something else reads too is no view of its own.
  if (std::find(chain.outputs.begin(), chain.outputs.end(), id) != chain.outputs.end()) return false;
  for (int32_t s = n.args[0]; IsInputViewStep(chain.nodes[s].kind); s = chain.nodes[s].args[0]) {
    int readers = 0;
    for (const Node& r : chain.nodes) readers += static_cast<int>(std::count(r.args.begin(), r.args.end(), s));
    if (readers != 1 || std::find(chain.outputs.begin(), chain.outputs.end(), s) != chain.outputs.end()) return false;
  }
  return true;
}

namespace {

// The InputViews `group` reads in place: its slices of chain inputs that it
// does not write, outermost only (the slices a view takes of slices, which
// nothing else reads, are folded with it).
std::set<int32_t> ViewsRead(const Chain& chain, const KernelGroup& group) {
  const std::set<int32_t> mine(group.nodes.begin(), group.nodes.end());
  const std::set<int32_t> written(group.results.begin(), group.results.end());
  std::set<int32_t> views;
  for (int32_t id : group.nodes) {
    // A view's own operands are folded with it; a reshape no InputView (a
    // per-row value's trailing unit dim) reads its operand as any op does.
    const OpKind k = chain.nodes[id].kind;
    if (k == OpKind::kSlice || (k == OpKind::kReshape && AsInputView(chain, id))) continue;
    for (int32_t a : chain.nodes[id].args) {
      if (mine.count(a) && !written.count(a) && ReadInPlace(chain, a)) views.insert(a);
    }
  }
  return views;
}

}  // namespace

bool CoversChain(const Chain& chain, const KernelGroup& group) {
  const std::set<int32_t> mine(group.nodes.begin(), group.nodes.end());
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    const OpKind k = chain.nodes[id].kind;
    if (k != OpKind::kInput && k != OpKind::kConstant && !mine.count(id)) return false;
  }
  return ViewsRead(chain, group).empty();
}

absl::StatusOr<SubChain> Isolate(const Chain& chain, const KernelGroup& group) {
  const std::set<int32_t> mine(group.nodes.begin(), group.nodes.end());
  std::set<int32_t> read;  // Nodes of earlier kernels the group reads.
  for (int32_t id : group.nodes) {
    for (int32_t a : chain.nodes[id].args) {
      const OpKind k = chain.nodes[a].kind;
      if (!mine.count(a) && k != OpKind::kInput && k != OpKind::kConstant) read.insert(a);
    }
  }
  SubChain s;
  Chain& c = s.chain;
  c.symbols = chain.symbols;
  std::map<int32_t, int32_t> to;  // Node of `chain` -> node of `c`.
  auto node_of = [&to](int32_t id, absl::string_view use) -> absl::StatusOr<int32_t> {
    auto it = to.find(id);
    if (it != to.end()) return it->second;
    return absl::InternalError(
        absl::StrCat("kernel group ", use, " node ", id, ", which neither it nor an earlier kernel computes"));
  };
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    const Node& n = chain.nodes[id];
    if (n.kind != OpKind::kInput) continue;
    to[id] = c.AddInput(n.type, n.strides);
    c.nodes[to[id]].input_index = n.input_index;
    s.inputs.push_back(BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(n.input_index)});
  }
  // AddInput numbers inputs in order; the chain's inputs are its first nodes
  // in input_index order, so the numbers agree.
  c.input_names = chain.input_names;
  // Unnamed inputs (chains built in code may have none) keep their places,
  // so that the intermediates' names land on their own inputs.
  c.input_names.resize(c.num_inputs());
  for (int32_t id : read) {
    to[id] = c.AddInput(TensorType{chain.nodes[id].type.dtype, chain.nodes[id].type.shape});
    c.nodes[to[id]].storage = IntermediateDType(chain, id);
    // Named as the op it is, so that messages about it name the client's op
    // (NodeLabel), not an input the client never sent.
    c.input_names.push_back(validate_internal::NodeLabel(chain, id));
    s.inputs.push_back(BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)});
  }
  // Slices of chain inputs read in place: inputs at strides of their own
  // on the viewed input's buffer; the slices (and slices they take of
  // slices) are no nodes of the group's chain.
  const std::set<int32_t> views = ViewsRead(chain, group);
  std::set<int32_t> folded;
  for (int32_t id : views) {
    const InputView v = *AsInputView(chain, id);
    to[id] = c.AddInput(chain.nodes[id].type, v.strides);
    c.nodes[to[id]].offset = v.offset;
    c.nodes[to[id]].storage = chain.nodes[v.input].storage;
    c.input_names.push_back(validate_internal::NodeLabel(chain, id));
    s.inputs.push_back(s.inputs[chain.nodes[v.input].input_index]);
    for (int32_t a = id; IsInputViewStep(chain.nodes[a].kind); a = chain.nodes[a].args[0]) folded.insert(a);
  }
  // A constant the group writes (a chain output) or reads is a node of its
  // chain; inputs are there already.
  const std::set<int32_t> results(group.results.begin(), group.results.end());
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    const Node& n = chain.nodes[id];
    bool used_constant = false;
    if (n.kind == OpKind::kConstant) {
      used_constant = results.count(id) > 0;
      for (int32_t g : group.nodes) {
        const std::vector<int32_t>& args = chain.nodes[g].args;
        used_constant = used_constant || std::find(args.begin(), args.end(), id) != args.end();
      }
    }
    if ((!mine.count(id) && !used_constant) || folded.count(id)) continue;
    Node copy = n;
    for (int32_t& a : copy.args) {
      KFUSE_ASSIGN_OR_RETURN(a, node_of(a, "reads"));
    }
    to[id] = static_cast<int32_t>(c.nodes.size());
    c.nodes.push_back(std::move(copy));
  }
  for (size_t j = 0; j < chain.outputs.size(); ++j) {
    if (!results.count(chain.outputs[j])) continue;
    KFUSE_ASSIGN_OR_RETURN(int32_t out, node_of(chain.outputs[j], "writes"));
    c.outputs.push_back(out);
    c.output_names.push_back(j < chain.output_names.size() ? chain.output_names[j] : "");
    s.outputs.push_back(BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)});
  }
  for (int32_t id : group.intermediates) {
    KFUSE_ASSIGN_OR_RETURN(int32_t out, node_of(id, "stores"));
    c.outputs.push_back(out);
    c.output_names.push_back(absl::StrCat("intermediate ", id));
    s.outputs.push_back(BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)});
  }
  // The client's chain passed the limits; a kernel of its plan also reads
  // and writes the intermediates between kernels, beyond them.
  Limits room;
  room.max_inputs = std::numeric_limits<int>::max();
  room.max_outputs = std::numeric_limits<int>::max();
  absl::StatusOr<Chain> valid = Validate(c, room);
  if (!valid.ok()) {
    return absl::InternalError(
        absl::StrCat("a kernel group as a chain of its own: ", valid.status().message()));
  }
  c = *std::move(valid);
  s.group.family = group.family;
  s.group.reason = group.reason;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    const OpKind k = c.nodes[id].kind;
    if (k != OpKind::kInput && k != OpKind::kConstant) s.group.nodes.push_back(id);
  }
  std::set<int32_t> outs(c.outputs.begin(), c.outputs.end());
  s.group.results.assign(outs.begin(), outs.end());
  return s;
}

absl::Status SubChain::Restore(KernelSpec* spec) const {
  // The group's chain has inputs and outputs only.
  auto rename = [&](BufferRef* b) -> absl::Status {
    const std::vector<BufferRef>& table = b->kind == BufferRef::Kind::kInput ? inputs : outputs;
    if (b->kind == BufferRef::Kind::kIntermediate || b->index >= table.size()) {
      return absl::InternalError(absl::StrCat("kernel ", spec->entry, " names buffer ", b->index,
                                              " its kernel group's chain does not have"));
    }
    *b = table[b->index];
    return absl::OkStatus();
  };
  for (KernelParam& p : spec->params) {
    if (p.kind == KernelParam::Kind::kBuffer) KFUSE_RETURN_IF_ERROR(rename(&p.buffer));
    if (p.kind == KernelParam::Kind::kTensorMap) KFUSE_RETURN_IF_ERROR(rename(&p.tensor_map.buffer));
  }
  for (Precondition& c : spec->preconditions) {
    if (c.kind == Precondition::Kind::kAligned || c.kind == Precondition::Kind::kContiguous) {
      BufferRef b = c.buffer;
      KFUSE_RETURN_IF_ERROR(rename(&b));
      RenameBuffer(b, &c);
    }
  }
  return absl::OkStatus();
}

}  // namespace kfuse
