#include "codegen/partition.h"

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<Partition> PartitionChain(const Chain& c) {
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
  std::vector<bool> is_result(c.nodes.size(), false);
  for (int32_t o : c.outputs) is_result[o] = true;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (is_result[id]) k.results.push_back(id);
  }
  Partition p;
  p.kernels.push_back(std::move(k));
  return p;
}

}  // namespace kfuse
