#include "codegen/partition.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/row_analysis.h"
#include "core/status.h"

namespace kfuse {
namespace {

std::string OpLabel(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  int32_t index = n.wire_index >= 0 ? n.wire_index : id - c.num_inputs();
  return absl::StrCat("op ", index, " (", std::string(OpName(n.kind)), ")");
}

std::string NotYet(OpKind k) {
  if (IsReduction(k)) return "row reductions are not generated yet";
  if (IsLayout(k)) return "layout views are not generated yet";
  if (k == OpKind::kMatmul) return "matmul is not generated yet";
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
  std::vector<Dim> space;
  for (size_t j = 0; j < c.outputs.size(); ++j) {
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
  }
  return absl::OkStatus();
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

}  // namespace

absl::StatusOr<Partition> PartitionChain(const Chain& c) {
  bool reduces = false;
  for (const Node& n : c.nodes) {
    if (IsLayout(n.kind) || n.kind == OpKind::kMatmul) {
      reduces = false;
      break;
    }
    reduces = reduces || IsReduction(n.kind);
  }
  if (reduces) return RowPartition(c);
  KernelGroup k;
  k.family = Family::kPointwise;
  k.reason = "element-wise chain fused into one pass";
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    OpKind kind = c.nodes[id].kind;
    if (kind == OpKind::kInput || kind == OpKind::kConstant) continue;
    if (!IsElementwise(kind)) {
      return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", NotYet(kind)));
    }
    k.nodes.push_back(id);
  }
  if (k.nodes.empty()) {
    return absl::InvalidArgumentError(
        "outputs: every output is a chain input or a constant: there is nothing to compute");
  }
  KFUSE_RETURN_IF_ERROR(OutputsShareOneIterationSpace(c));
  return OneKernel(c, std::move(k));
}

}  // namespace kfuse
