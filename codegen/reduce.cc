#include "codegen/reduce.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/reduce_plan.h"
#include "core/status.h"

namespace kfuse {
namespace {

absl::Status BadParam(const Variant& v, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("variant ", v.ToString(), ": ", what));
}

}  // namespace

absl::Status CheckOuterReduction(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  const TensorType& in = c.nodes[n.args[0]].type;
  auto no = [&](const char* why) {
    return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", why));
  };
  if (!IsReduction(n.kind)) return no("is not a reduction");
  if (in.rank() == 0 || n.axes.empty()) return no("a reduction of a scalar is not generated yet");
  if (std::find(n.axes.begin(), n.axes.end(), in.rank() - 1) != n.axes.end()) {
    return no(n.axes.size() == 1
                  ? "a reduction along the innermost axis belongs to the row family"
                  : "a reduction over the innermost axis and outer axes together is not "
                    "generated yet");
  }
  if (in.dtype == DType::kBool && n.kind != OpKind::kReduceSum) {
    return no("min/max of bool values are not generated yet");
  }
  return absl::OkStatus();
}

namespace reduce_internal {
namespace {

// Element strides of a buffer of `shape` (its own `own` strides) over the
// iteration space `space` (right-aligned; broadcast and unit dims get 0).
std::vector<Mono> StridesOver(const std::vector<Dim>& shape, const std::vector<Mono>& own,
                              const std::vector<Dim>& space) {
  KFUSE_CHECK(shape.size() <= space.size());  // Operands broadcast to their results.
  const size_t r = space.size(), off = r - shape.size();
  std::vector<Mono> st(r, Mono{0, {}});
  for (size_t i = off; i < r; ++i) {
    if (space[i] == Dim::Static(1) || shape[i - off] != space[i]) continue;
    st[i] = own[i - off];
  }
  return st;
}

std::vector<Mono> DenseStrides(const std::vector<Dim>& shape) {
  std::vector<Mono> st(shape.size());
  Mono acc{1, {}};
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * Mono::Of(shape[i]);
  }
  return st;
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const Chain& c, const KernelGroup& group, const Variant& variant,
                              Numerics numerics) {
  if (group.family != Family::kReduction) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel group is ", std::string(FamilyName(group.family)), ", not reduction"));
  }
  if (variant.family != Family::kReduction) return BadParam(variant, "family must be reduction");
  for (const auto& [name, value] : variant.params) {
    if (name != "block") return BadParam(variant, absl::StrCat("unknown param \"", name, "\""));
  }
  if (!variant.params.count("block")) return BadParam(variant, "missing block");
  const int64_t block = variant.Get("block");
  if (block != 128 && block != 256 && block != 512) {
    return BadParam(variant, "block must be 128, 256 or 512");
  }
  const int32_t num_nodes = static_cast<int32_t>(c.nodes.size());
  Plan p;
  p.numerics = numerics;
  p.block = static_cast<int>(block);
  std::set<int32_t> members;
  for (int32_t id : group.nodes) {
    if (id < 0 || id >= num_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("kernel group refers to no node ", id));
    }
    members.insert(id);
    const OpKind k = c.nodes[id].kind;
    if (IsReduction(k)) {
      if (p.reduction >= 0) {
        return absl::InvalidArgumentError("a reduction kernel computes one reduction");
      }
      p.reduction = id;
    } else if (!IsElementwise(k)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", id, ": a reduction kernel computes its reduction and element-wise nodes"));
    }
  }
  if (p.reduction < 0) return absl::InvalidArgumentError("a reduction kernel needs a reduction");
  if (group.results != std::vector<int32_t>{p.reduction}) {
    return absl::InvalidArgumentError("a reduction kernel's one result is its reduction");
  }
  for (int32_t id : group.intermediates) {
    if (id != p.reduction) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", id, ": a reduction kernel writes no other intermediate"));
    }
    p.writes_intermediate = true;
  }
  KFUSE_RETURN_IF_ERROR(CheckOuterReduction(c, p.reduction));
  const Node& red = c.nodes[p.reduction];
  p.shape = c.nodes[red.args[0]].type.shape;
  p.reduced.assign(p.shape.size(), false);
  for (int64_t a : red.axes) p.reduced[a] = true;

  // The operand's closure: group members computed here, constants inline,
  // everything else read per element.
  std::set<int32_t> compute, inputs, intermediates;
  std::vector<int32_t> stack = {red.args[0]};
  std::set<int32_t> seen;
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    if (!seen.insert(id).second) continue;
    const Node& n = c.nodes[id];
    if (n.kind == OpKind::kInput) {
      inputs.insert(id);
    } else if (n.kind == OpKind::kConstant) {
      compute.insert(id);
    } else if (members.count(id)) {
      compute.insert(id);
      for (int32_t a : n.args) stack.push_back(a);
    } else {
      intermediates.insert(id);
    }
  }
  p.compute.assign(compute.begin(), compute.end());
  std::vector<int32_t> by_index(inputs.begin(), inputs.end());
  std::sort(by_index.begin(), by_index.end(), [&](int32_t a, int32_t b) {
    return c.nodes[a].input_index < c.nodes[b].input_index;
  });
  for (int32_t id : by_index) {
    const Node& n = c.nodes[id];
    std::vector<Mono> own;
    if (n.strides.empty()) {
      own = DenseStrides(n.type.shape);
    } else {
      for (int64_t s : n.strides) own.push_back(Mono{s, {}});
    }
    p.leaves.push_back(Leaf{id,
                            BufferRef{BufferRef::Kind::kInput,
                                      static_cast<uint32_t>(n.input_index)},
                            n.type.dtype, StridesOver(n.type.shape, own, p.shape)});
  }
  for (int32_t id : intermediates) {
    const TensorType& t = c.nodes[id].type;
    p.leaves.push_back(Leaf{id,
                            BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)},
                            t.dtype, StridesOver(t.shape, DenseStrides(t.shape), p.shape)});
  }
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    if (c.outputs[j] == p.reduction) p.outputs.push_back(static_cast<uint32_t>(j));
  }
  if (p.outputs.empty() && !p.writes_intermediate) {
    return absl::InvalidArgumentError(
        "the reduction is neither a chain output nor read by a later kernel");
  }
  std::set<int32_t> syms;
  for (const Dim& d : p.shape) {
    if (!d.is_static()) syms.insert(d.symbol);
  }
  p.symbols.assign(syms.begin(), syms.end());
  return p;
}

}  // namespace reduce_internal

using reduce_internal::MakePlan;
using reduce_internal::Plan;

absl::Status CanGenerateReduce(const Chain& chain, const KernelGroup& group,
                               const Variant& variant) {
  return MakePlan(chain, group, variant, Numerics::kFast).status();
}

absl::StatusOr<KernelSpec> EmitReduce(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant, Numerics numerics) {
  KFUSE_ASSIGN_OR_RETURN(Plan plan, MakePlan(chain, group, variant, numerics));
  KFUSE_ASSIGN_OR_RETURN(reduce_internal::Source src, reduce_internal::WriteSource(chain, plan));
  KernelSpec k;
  k.entry = std::move(src.entry);
  k.source = std::move(src.text);
  // Parameter order: chain inputs (all of them), intermediates read, chain
  // outputs written, the intermediate written, symbols.
  for (int i = 0; i < chain.num_inputs(); ++i) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(i)}));
  }
  for (const reduce_internal::Leaf& l : plan.leaves) {
    if (l.buffer.kind == BufferRef::Kind::kIntermediate) {
      k.params.push_back(KernelParam::Buffer(l.buffer));
    }
  }
  for (uint32_t j : plan.outputs) {
    k.params.push_back(KernelParam::Buffer(BufferRef{BufferRef::Kind::kOutput, j}));
  }
  if (plan.writes_intermediate) {
    k.params.push_back(KernelParam::Buffer(BufferRef{
        BufferRef::Kind::kIntermediate, static_cast<uint32_t>(plan.reduction)}));
  }
  for (int32_t sym : plan.symbols) {
    k.params.push_back(
        KernelParam::Scalar(SizeExpr::Symbol(static_cast<uint32_t>(sym)), DType::kI64));
  }
  SizeExpr outputs = SizeExpr::Const(1);
  bool first = true;
  for (size_t d = 0; d < plan.shape.size(); ++d) {
    if (plan.reduced[d] || plan.shape[d] == Dim::Static(1)) continue;
    const Dim& dim = plan.shape[d];
    SizeExpr e = dim.is_static() ? SizeExpr::Const(dim.size)
                                 : SizeExpr::Symbol(static_cast<uint32_t>(dim.symbol));
    outputs = first ? e : SizeExpr::Mul(outputs, e);
    first = false;
  }
  k.grid.x = SizeExpr::CeilDiv(outputs, SizeExpr::Const(plan.block));
  k.block.x = SizeExpr::Const(plan.block);
  k.variant = variant;
  for (int32_t id : plan.compute) {
    if (chain.nodes[id].kind != OpKind::kConstant) k.ops.push_back(static_cast<uint32_t>(id));
  }
  k.ops.push_back(static_cast<uint32_t>(plan.reduction));
  std::sort(k.ops.begin(), k.ops.end());
  k.partition_reason = group.reason;
  return k;
}

Variant ReduceHeuristic(const Chain&, const KernelGroup&) {
  return Variant{Family::kReduction, {{"block", 256}}};
}

std::vector<Variant> ReduceSpace(const Chain& chain, const KernelGroup& group) {
  std::vector<Variant> out;
  for (int64_t block : {256, 128, 512}) {
    Variant v{Family::kReduction, {{"block", block}}};
    if (CanGenerateReduce(chain, group, v).ok()) out.push_back(std::move(v));
  }
  return out;
}

}  // namespace kfuse
