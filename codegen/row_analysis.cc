#include "codegen/row_analysis.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace kfuse {
namespace {

using Class = RowStructure::Class;

absl::Status NotRow(const Chain& c, int32_t id, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", why));
}

// True when `t` broadcasts to `frame` (right-aligned, dims 1 or equal).
bool Broadcasts(const TensorType& t, const std::vector<Dim>& frame) {
  if (t.rank() > static_cast<int>(frame.size())) return false;
  const size_t off = frame.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const Dim& x = t.shape[d];
    if (x != frame[off + d] && x != Dim::Static(1)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<RowStructure> AnalyzeRows(const Chain& c) {
  const int32_t n = static_cast<int32_t>(c.nodes.size());
  RowStructure r;
  bool have_rows = false;
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (nd.kind == OpKind::kInput) {
      if (!nd.strides.empty()) return NotRow(c, id, "strided inputs to row reductions are not generated yet");
      continue;
    }
    if (IsLayout(nd.kind)) return NotRow(c, id, "layout views are not generated yet");
    if (nd.kind == OpKind::kMatmul) return NotRow(c, id, "matmul is not generated yet");
    if (!IsReduction(nd.kind) && !IsElementwise(nd.kind)) {
      return NotRow(c, id, "this op is not generated yet");
    }
    if (!IsReduction(nd.kind)) continue;
    const TensorType& in = c.nodes[nd.args[0]].type;
    if (in.rank() == 0 || nd.axes.empty()) return NotRow(c, id, "a reduction of a scalar is not generated yet");
    if (nd.axes.size() != 1 || nd.axes[0] != in.rank() - 1) {
      return NotRow(c, id, "reductions over an outer axis are not generated yet");
    }
    if (in.dtype == DType::kBool && nd.kind != OpKind::kReduceSum) {
      return NotRow(c, id, "min/max of bool rows are not generated yet");
    }
    if (!have_rows) {
      r.row_shape = in.shape;
      have_rows = true;
    } else if (in.shape != r.row_shape) {
      return NotRow(c, id, "reductions over rows of different shapes are not fused yet");
    }
  }
  if (!have_rows) return absl::InvalidArgumentError("chain has no reduction");
  r.width = r.row_shape.back();
  const std::vector<Dim> full = r.row_shape;
  const std::vector<Dim> reduced(full.begin(), full.end() - 1);

  // Frames: non-keepdim reductions start the per-row frame; element-wise ops
  // inherit it; inputs take their users' frame.
  enum Frame { kUnset, kFull, kReduced };
  std::vector<Frame> frame(n, kUnset);
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (nd.kind == OpKind::kInput || nd.kind == OpKind::kConstant) continue;
    if (IsReduction(nd.kind)) {
      frame[id] = nd.keepdim ? kFull : kReduced;
      continue;
    }
    Frame f = kUnset;
    bool reduced_scalar = false;
    for (int32_t a : nd.args) {
      if (frame[a] == kUnset) continue;
      if (c.nodes[a].type.rank() == 0) {
        // A rank-0 value is uniform, or, made by a reduction, the one
        // per-row value of rows of one dim: it broadcasts to either frame,
        // and rank-0 work on it stays per row.
        reduced_scalar = reduced_scalar || frame[a] == kReduced;
        continue;
      }
      if (f != kUnset && f != frame[a]) {
        return NotRow(c, id, "mixes per-row values of a reduction without keepdim with full rows");
      }
      f = frame[a];
    }
    frame[id] = f != kUnset ? f : reduced_scalar && nd.type.rank() == 0 ? kReduced : kFull;
  }
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (nd.kind == OpKind::kInput || nd.kind == OpKind::kConstant) continue;
    for (int32_t a : nd.args) {
      if (c.nodes[a].kind != OpKind::kInput) continue;
      Frame want = IsReduction(nd.kind) ? kFull : frame[id];
      if (frame[a] != kUnset && frame[a] != want && c.nodes[a].type.rank() > 0) {
        return NotRow(c, a, "is used both per row and per element");
      }
      frame[a] = want;
    }
  }
  r.cls.assign(n, Class::kNone);
  r.level.assign(n, 0);
  r.reduced_frame.assign(n, false);
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    r.reduced_frame[id] = frame[id] == kReduced;
    if (nd.kind == OpKind::kConstant || (nd.kind == OpKind::kInput && nd.type.rank() == 0)) {
      r.cls[id] = Class::kUniform;
      continue;
    }
    if (frame[id] == kUnset) continue;  // An input nothing reads.
    const std::vector<Dim>& f = frame[id] == kReduced ? reduced : full;
    if (!Broadcasts(nd.type, f)) return NotRow(c, id, "does not broadcast to the rows");
    if (nd.kind == OpKind::kInput) {
      r.cls[id] = frame[id] == kFull && nd.type.rank() > 0 && nd.type.shape.back() == r.width
                      ? Class::kElement
                      : Class::kRow;
      continue;
    }
    if (IsReduction(nd.kind)) {
      r.cls[id] = Class::kRow;
      r.level[id] = r.level[nd.args[0]] + 1;
      continue;
    }
    Class k = Class::kRow;
    for (int32_t a : nd.args) {
      if (r.cls[a] == Class::kElement) k = Class::kElement;
      r.level[id] = std::max(r.level[id], r.level[a]);
    }
    r.cls[id] = k;
  }
  for (int32_t id = 0; id < n; ++id) {
    if (!IsReduction(c.nodes[id].kind)) continue;
    const size_t p = static_cast<size_t>(r.level[id]);
    if (r.phases.size() < p) r.phases.resize(p);
    r.phases[p - 1].push_back(id);
  }
  std::vector<Dim> keep = reduced;
  keep.push_back(Dim::Static(1));
  for (int32_t o : c.outputs) {
    const Node& nd = c.nodes[o];
    const bool ok = r.cls[o] == Class::kElement
                        ? nd.type.shape == full
                        : r.cls[o] == Class::kRow && (nd.kind != OpKind::kInput) &&
                              nd.type.shape == (r.reduced_frame[o] ? reduced : keep);
    if (!ok) {
      return NotRow(c, o, "an output must be a whole row or hold one value per row");
    }
  }
  return r;
}

}  // namespace kfuse
