#include "codegen/partition.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/attention.h"
#include "codegen/generators.h"
#include "codegen/pointwise_layout.h"
#include "codegen/reduce.h"
#include "codegen/row_analysis.h"
#include "codegen/subchain.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse {
namespace {

bool IsLeaf(const Chain& c, int32_t id) {
  return c.nodes[id].kind == OpKind::kInput || c.nodes[id].kind == OpKind::kConstant;
}

// The computed nodes `roots` need, walking args up to the chain's leaves
// and the nodes `stop(id)` holds for (values read from memory).
template <typename Stop>
std::set<int32_t> Closure(const Chain& c, std::vector<int32_t> roots, Stop stop) {
  std::set<int32_t> out;
  while (!roots.empty()) {
    const int32_t id = roots.back();
    roots.pop_back();
    if (IsLeaf(c, id) || stop(id) || !out.insert(id).second) continue;
    for (int32_t a : c.nodes[id].args) roots.push_back(a);
  }
  return out;
}

}  // namespace

namespace partition_internal {

std::set<int32_t> ElementwiseClosure(const Chain& c, std::vector<int32_t> roots,
                                     const std::set<int32_t>& stored) {
  return Closure(c, std::move(roots),
                 [&](int32_t id) { return IsReduction(c.nodes[id].kind) || stored.count(id) > 0; });
}

absl::Status OutputsShareOneIterationSpace(const Chain& c, const std::vector<size_t>& which) {
  std::vector<Dim> space;
  for (size_t j : which) {
    const std::vector<Dim>& shape = c.nodes[c.outputs[j]].type.shape;
    std::vector<Dim> merged(std::max(space.size(), shape.size()), Dim::Static(1));
    for (size_t i = 0; i < merged.size(); ++i) {
      const Dim* a = i < space.size() ? &space[space.size() - 1 - i] : nullptr;
      const Dim* b = i < shape.size() ? &shape[shape.size() - 1 - i] : nullptr;
      auto is_one = [](const Dim* d) { return d == nullptr || (d->is_static() && d->size == 1); };
      Dim& out = merged[merged.size() - 1 - i];
      if (is_one(a)) {
        out = b != nullptr ? *b : Dim::Static(1);
      } else if (is_one(b) || *a == *b) {
        out = *a;
      } else {
        return absl::UnimplementedError(absl::StrCat(
            "outputs[", j, "]: its shape does not broadcast with the earlier outputs'; one kernel "
            "cannot write them all yet (ask for them in separate chains)"));
      }
    }
    space = std::move(merged);
    // Each output is within the element limit, but a broadcast of several
    // can pass it (and overflow the kernel's index arithmetic).
    const int64_t limit = Limits{}.max_elements;
    if (CountElements(c, space, limit) > limit) {
      return absl::UnimplementedError(absl::StrCat(
          "outputs[", j, "]: broadcast with the earlier outputs, one kernel would iterate over "
          "more than ", limit, " elements (ask for them in separate chains)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace partition_internal

namespace {

using partition_internal::ElementwiseClosure;
using partition_internal::OutputsShareOneIterationSpace;

std::string NotYet(OpKind k) {
  if (k == OpKind::kIota) return "iota is not generated yet (the other layout views are)";
  if (IsLayout(k)) {
    return "layout views are generated in element-wise chains only; beside a reduction they are "
           "not generated yet";
  }
  return "this op is not generated yet";
}

// A plan of the one kernel `k`, which writes every chain output.
Partition OneKernel(const Chain& c, KernelGroup k) {
  std::vector<bool> is_result(c.nodes.size(), false);
  for (int32_t o : c.outputs) is_result[o] = true;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (is_result[id]) k.results.push_back(id);
  }
  Partition p;
  p.kernels.push_back(std::move(k));
  return p;
}

// One pointwise kernel iterates over the broadcast of its outputs' shapes;
// outputs that do not broadcast together would need a kernel each.
absl::Status OutputsShareOneIterationSpace(const Chain& c) {
  std::vector<size_t> all(c.outputs.size());
  for (size_t j = 0; j < all.size(); ++j) all[j] = j;
  return OutputsShareOneIterationSpace(c, all);
}

// A chain whose reductions all run along rows: one row kernel.
absl::StatusOr<Partition> RowPartition(const Chain& c) {
  KFUSE_RETURN_IF_ERROR(AnalyzeRows(c).status());
  KernelGroup k;
  k.family = Family::kRowReduction;
  k.reason = "row reductions fused with their element-wise neighbours";
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    OpKind kind = c.nodes[id].kind;
    if (kind != OpKind::kInput && kind != OpKind::kConstant) k.nodes.push_back(id);
  }
  return OneKernel(c, std::move(k));
}

std::string AxesText(const Node& n) { return absl::StrCat("[", absl::StrJoin(n.axes, ", "), "]"); }

// Whether a reduction runs along the innermost axis of its operand alone
// (from its own type: a pointwise view hides the args of other kernels'
// nodes).
bool AlongRows(const Node& reduction) {
  const int64_t rank = reduction.type.rank() +
                       (reduction.keepdim ? 0 : static_cast<int64_t>(reduction.axes.size()));
  return rank > 0 && reduction.axes == std::vector<int64_t>{rank - 1};
}

// The last kernel of an outer-reduction plan where reductions along rows
// remain: a row kernel computing `roots` (every chain output the reduction
// kernels do not write), reading their results from memory.
absl::StatusOr<Partition> WithRowKernel(const Chain& c, Partition p,
                                        const std::vector<int32_t>& roots) {
  std::set<int32_t> outer;
  for (const KernelGroup& k : p.kernels) outer.insert(k.results.begin(), k.results.end());
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    if (IsLeaf(c, c.outputs[j])) {
      return absl::UnimplementedError(absl::StrCat(
          "outputs[", j, "]: a chain input or constant as an output beside reductions over an "
          "outer axis is not generated yet"));
    }
  }
  // Element-wise nodes and reductions along rows, up to the outer results.
  const std::set<int32_t> nodes =
      Closure(c, roots, [&](int32_t id) { return outer.count(id) > 0; });
  KernelGroup k;
  k.family = Family::kRowReduction;
  k.nodes.assign(nodes.begin(), nodes.end());
  const std::set<int32_t> results(roots.begin(), roots.end());
  k.results.assign(results.begin(), results.end());
  std::vector<std::string> read;
  for (int32_t id : k.nodes) {
    for (int32_t a : c.nodes[id].args) {
      if (outer.count(a)) read.push_back(OpLabel(c, a));
    }
  }
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  k.reason = read.empty()
                 ? "row reductions fused with their element-wise neighbours, beside the "
                   "reductions over outer axes"
                 : absl::StrCat("row reductions fused with their element-wise neighbours, "
                                "reading ", absl::StrJoin(read, ", "),
                                " from memory, broadcast along rows");
  // The row generator sees the group as a chain of its own.
  KFUSE_ASSIGN_OR_RETURN(SubChain sub, Isolate(c, k));
  KFUSE_RETURN_IF_ERROR(AnalyzeRows(sub.chain).status());
  p.kernels.push_back(std::move(k));
  return p;
}

// Some reduction runs over outer axes: a reduction kernel per such
// reduction, in chain order, then one kernel for the other outputs: a row
// kernel where reductions along rows remain (they read the outer results
// broadcast, as a norm's weight), else a pointwise kernel.
absl::StatusOr<Partition> OuterReductionPartition(const Chain& c) {
  const int32_t n = static_cast<int32_t>(c.nodes.size());
  std::vector<int32_t> reductions;
  bool rows = false;
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (!IsReduction(nd.kind)) continue;
    if (AlongRows(nd)) {
      rows = true;
      continue;
    }
    KFUSE_RETURN_IF_ERROR(CheckOuterReduction(c, id));
    reductions.push_back(id);
  }
  const std::set<int32_t> outer(reductions.begin(), reductions.end());
  std::set<int32_t> consumed;  // Outer reductions other nodes read.
  for (const Node& nd : c.nodes) {
    for (int32_t a : nd.args) {
      if (outer.count(a)) consumed.insert(a);
    }
  }
  Partition p;
  for (int32_t r : reductions) {
    const Node& nd = c.nodes[r];
    std::set<int32_t> nodes = ElementwiseClosure(c, {nd.args[0]});
    nodes.insert(r);
    for (int32_t id : nodes) {
      for (int32_t a : c.nodes[id].args) {
        if (IsReduction(c.nodes[a].kind) && !outer.count(a)) {
          return absl::UnimplementedError(absl::StrCat(
              OpLabel(c, r), ": a reduction over outer axes of a value that reduces along rows (",
              OpLabel(c, a), ") is not generated yet"));
        }
      }
    }
    KernelGroup k;
    k.family = Family::kReduction;
    k.nodes.assign(nodes.begin(), nodes.end());
    k.results = {r};
    if (consumed.count(r)) {
      k.intermediates = {r};
      p.intermediates.push_back(r);
    }
    k.reason = absl::StrCat(
        OpLabel(c, r), " over outer axes ", AxesText(nd),
        ": a kernel of its own, as each result needs the whole reduced extent (split over "
        "threads and blocks that compute the operand inline and meet before it is written); ",
        k.intermediates.empty() ? "its result is a chain output"
                                : "later kernels read its result from memory");
    p.kernels.push_back(std::move(k));
  }

  // The outputs no reduction kernel writes: one kernel, which recomputes
  // the element-wise work it shares with the reduction kernels.
  std::vector<size_t> rest;
  std::vector<int32_t> roots;
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    if (outer.count(c.outputs[j])) continue;
    rest.push_back(j);
    roots.push_back(c.outputs[j]);
  }
  if (rest.empty()) return p;
  if (rows) return WithRowKernel(c, std::move(p), roots);
  const std::set<int32_t> nodes = ElementwiseClosure(c, roots);
  if (nodes.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "outputs[", rest[0],
        "]: a chain input or constant as an output beside reductions over an outer axis is not "
        "generated yet"));
  }
  KFUSE_RETURN_IF_ERROR(OutputsShareOneIterationSpace(c, rest));
  KernelGroup k;
  k.family = Family::kPointwise;
  k.nodes.assign(nodes.begin(), nodes.end());
  const std::set<int32_t> results(roots.begin(), roots.end());
  k.results.assign(results.begin(), results.end());
  std::set<int32_t> read;
  for (int32_t id : k.nodes) {
    for (int32_t a : c.nodes[id].args) {
      if (IsReduction(c.nodes[a].kind)) read.insert(a);
    }
  }
  std::vector<std::string> labels;
  for (int32_t r : read) labels.push_back(OpLabel(c, r));
  k.reason = labels.empty()
                 ? "element-wise outputs beside the reductions, in one pass"
                 : absl::StrCat("element-wise work after the reductions, reading ",
                                absl::StrJoin(labels, ", "), " from memory, broadcast");
  p.kernels.push_back(std::move(k));
  return p;
}

// PartitionChain for a chain that is not a fused attention.
absl::StatusOr<Partition> PartitionUnmatched(const Chain& c) {
  bool reduces = false, outer = false, multiplies = false;
  int32_t first_view = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    const Node& n = c.nodes[id];
    if (n.kind == OpKind::kIota) {
      return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", NotYet(n.kind)));
    }
    multiplies = multiplies || n.kind == OpKind::kMatmul;
    if (IsLayout(n.kind) && first_view < 0) first_view = id;
    if (!IsReduction(n.kind)) continue;
    reduces = true;
    const int rank = c.nodes[n.args[0]].type.rank();
    outer = outer || std::find(n.axes.begin(), n.axes.end(), rank - 1) == n.axes.end() ||
            n.axes.size() > 1;
  }
  if (multiplies) return partition_internal::MatmulPartition(c);
  if (reduces && first_view >= 0) {
    return absl::UnimplementedError(
        absl::StrCat(OpLabel(c, first_view), ": ", NotYet(c.nodes[first_view].kind)));
  }
  if (outer) return OuterReductionPartition(c);
  if (reduces) return RowPartition(c);
  // Layout views join the element-wise chain as index arithmetic: each read
  // gets its own strides and offset, a concat picks a piece per element.
  KernelGroup k;
  k.family = Family::kPointwise;
  k.reason = first_view < 0 ? "element-wise chain fused into one pass"
                            : "element-wise chain with its layout views fused into one pass";
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    OpKind kind = c.nodes[id].kind;
    if (kind == OpKind::kInput || kind == OpKind::kConstant) continue;
    if (!IsElementwise(kind) && !IsLayout(kind)) {
      return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", NotYet(kind)));
    }
    k.nodes.push_back(id);
  }
  if (k.nodes.empty()) {
    return absl::InvalidArgumentError(
        "outputs: every output is a chain input or a constant: there is nothing to compute");
  }
  KFUSE_RETURN_IF_ERROR(OutputsShareOneIterationSpace(c));
  Partition p = OneKernel(c, std::move(k));
  // A reshape that is no view of its operand is refused here, naming it.
  if (first_view >= 0) KFUSE_RETURN_IF_ERROR(BuildIterSpace(c, p.kernels[0]).status());
  return p;
}

}  // namespace

absl::StatusOr<Partition> PartitionChain(const Chain& c) {
  std::optional<AttentionMatch> m = MatchAttention(c);
  if (!m) return PartitionUnmatched(c);
  Partition p;
  p.kernels.push_back(AttentionGroup(c, *m));
  // An attention the fused kernel does not take (a head dim past 256, say)
  // is still two products and a softmax: their kernels serve it when every
  // one of them generates; else the attention kernel's reason is the answer.
  absl::Status fused = CanGenerateAttention(c, p.kernels[0], AttentionHeuristic(c, p.kernels[0]));
  if (fused.ok() || !absl::IsUnimplemented(fused)) return p;
  absl::StatusOr<Partition> apart = PartitionUnmatched(c);
  if (!apart.ok()) return fused;
  for (const KernelGroup& k : apart->kernels) {
    if (!CanGenerateFamily(c, k, FamilyHeuristic(c, k)).ok()) return fused;
  }
  return apart;
}

DType IntermediateDType(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  const bool half = n.type.dtype == DType::kF16 || n.type.dtype == DType::kBF16;
  return half && IsReduction(n.kind) && !AlongRows(n) ? DType::kF32 : n.type.dtype;
}

std::vector<IntermediateBuffer> IntermediateBuffers(const Chain& c, const Partition& p) {
  std::vector<IntermediateBuffer> out;
  for (int32_t id : p.intermediates) {
    IntermediateBuffer b;
    b.dtype = IntermediateDType(c, id);
    for (const Dim& d : c.nodes[id].type.shape) {
      b.shape.push_back(d.is_static() ? SizeExpr::Const(d.size)
                                      : SizeExpr::Symbol(static_cast<uint32_t>(d.symbol)));
    }
    out.push_back(std::move(b));
  }
  return out;
}

absl::Status NumberIntermediates(const Partition& p, KernelSpec* spec) {
  auto renumber = [&](BufferRef* b) -> absl::Status {
    if (b->kind != BufferRef::Kind::kIntermediate) return absl::OkStatus();
    auto it = std::find(p.intermediates.begin(), p.intermediates.end(),
                        static_cast<int32_t>(b->index));
    if (it == p.intermediates.end()) {
      return absl::InternalError(absl::StrCat("kernel ", spec->entry, " names node ", b->index,
                                              " as an intermediate; the partition does not"));
    }
    b->index = static_cast<uint32_t>(it - p.intermediates.begin());
    return absl::OkStatus();
  };
  for (KernelParam& k : spec->params) {
    if (k.kind == KernelParam::Kind::kBuffer) KFUSE_RETURN_IF_ERROR(renumber(&k.buffer));
    if (k.kind == KernelParam::Kind::kTensorMap) {
      KFUSE_RETURN_IF_ERROR(renumber(&k.tensor_map.buffer));
    }
  }
  for (Precondition& c : spec->preconditions) {
    if (c.kind == Precondition::Kind::kAligned || c.kind == Precondition::Kind::kContiguous) {
      BufferRef b = c.buffer;
      KFUSE_RETURN_IF_ERROR(renumber(&b));
      RenameBuffer(b, &c);
    }
  }
  return absl::OkStatus();
}

void RenameBuffer(const BufferRef& to, Precondition* c) {
  const auto label = [](const BufferRef& b) {
    const char* kind = b.kind == BufferRef::Kind::kInput    ? "input "
                       : b.kind == BufferRef::Kind::kOutput ? "output "
                                                            : "intermediate ";
    return absl::StrCat(kind, b.index, " ");
  };
  const std::string from = label(c->buffer);
  if (absl::StartsWith(c->description, from)) {
    c->description = absl::StrCat(label(to), c->description.substr(from.size()));
  }
  c->buffer = to;
}

}  // namespace kfuse
