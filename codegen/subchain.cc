#include "codegen/subchain.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/validate.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse {

bool CoversChain(const Chain& chain, const KernelGroup& group) {
  const std::set<int32_t> mine(group.nodes.begin(), group.nodes.end());
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    const OpKind k = chain.nodes[id].kind;
    if (k != OpKind::kInput && k != OpKind::kConstant && !mine.count(id)) return false;
  }
  return true;
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
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    const Node& n = chain.nodes[id];
    bool used_constant = false;
    if (n.kind == OpKind::kConstant) {
      for (int32_t g : group.nodes) {
        const std::vector<int32_t>& args = chain.nodes[g].args;
        used_constant = used_constant || std::find(args.begin(), args.end(), id) != args.end();
      }
    }
    if (!mine.count(id) && !used_constant) continue;
    Node copy = n;
    for (int32_t& a : copy.args) {
      auto it = to.find(a);
      if (it == to.end()) {
        return absl::InternalError(absl::StrCat("kernel group reads node ", a,
                                                " that neither it nor an earlier kernel computes"));
      }
      a = it->second;
    }
    to[id] = static_cast<int32_t>(c.nodes.size());
    c.nodes.push_back(std::move(copy));
  }
  const std::set<int32_t> results(group.results.begin(), group.results.end());
  for (size_t j = 0; j < chain.outputs.size(); ++j) {
    if (!results.count(chain.outputs[j])) continue;
    c.outputs.push_back(to.at(chain.outputs[j]));
    c.output_names.push_back(j < chain.output_names.size() ? chain.output_names[j] : "");
    s.outputs.push_back(BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)});
  }
  for (int32_t id : group.intermediates) {
    c.outputs.push_back(to.at(id));
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
