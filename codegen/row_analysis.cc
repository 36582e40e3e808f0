#include "codegen/row_analysis.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/validate_internal.h"

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

int TrailingUnit(const Chain& c, const Node& nd) {
  if (nd.kind != OpKind::kReshape) return 0;
  const std::vector<Dim>& in = c.nodes[nd.args[0]].type.shape;
  const std::vector<Dim>& out = nd.type.shape;
  const auto extends = [](const std::vector<Dim>& a, const std::vector<Dim>& b) {
    return b.size() == a.size() + 1 && b.back() == Dim::Static(1) &&
           std::equal(a.begin(), a.end(), b.begin());
  };
  if (extends(in, out)) return 1;
  if (extends(out, in)) return -1;
  return 0;
}

absl::StatusOr<RowStructure> AnalyzeRows(const Chain& c) {
  const int32_t n = static_cast<int32_t>(c.nodes.size());
  RowStructure r;
  bool have_rows = false;
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (nd.kind == OpKind::kInput) continue;
    if (nd.kind == OpKind::kIota) continue;  // Checked once the width is known.
    // A per-row value's trailing unit dim added or dropped: the value moves
    // between the per-row frame and the full one (checked with the frames).
    if (TrailingUnit(c, nd) != 0) continue;
    if (IsLayout(nd.kind)) {
      return NotRow(c, id,
                    "layout views beside row reductions are not generated yet (but for a "
                    "reshape adding or dropping a per-row value's trailing unit dim)");
    }
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
  // An iota along the rows is each element's column: class labels compared
  // with it pick a row's element (a cross-entropy's target logit).
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (nd.kind != OpKind::kIota) continue;
    if (nd.axis != nd.type.rank() - 1 || nd.type.shape.back() != r.width) {
      return NotRow(c, id, "an iota beside row reductions must count along the rows (its last "
                           "axis, as wide as they are)");
    }
    // Columns are counted in 32 bits.
    const int64_t most = r.width.is_static() ? r.width.size : c.symbols[r.width.symbol].max;
    if ((!r.width.is_static() && most <= 0) || most > int64_t{1} << 31) {
      return NotRow(c, id, "an iota along rows needs their width at most 2^31 (a static width, "
                           "or a symbol's max)");
    }
  }
  const std::vector<Dim> full = r.row_shape;
  const std::vector<Dim> reduced(full.begin(), full.end() - 1);

  // Frames: non-keepdim reductions start the per-row frame, a reshape
  // adding a unit dim to a per-row value the full one; element-wise ops
  // inherit their operands'. Inputs, and values computed from inputs and
  // constants alone, take the frame their users need (below).
  enum Frame { kUnset, kFull, kReduced };
  std::vector<Frame> frame(n, kUnset);
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (nd.kind == OpKind::kInput || nd.kind == OpKind::kConstant) continue;
    if (IsReduction(nd.kind)) {
      frame[id] = nd.keepdim ? kFull : kReduced;
      continue;
    }
    if (const int unit = TrailingUnit(c, nd); unit != 0) {
      const Frame from = unit > 0 ? kReduced : kFull;
      if (frame[nd.args[0]] != kUnset && frame[nd.args[0]] != from) {
        return NotRow(c, id, unit > 0 ? "adds a unit dim to a value that is not one per row"
                                      : "drops the unit dim of a value that is not one per row");
      }
      frame[id] = unit > 0 ? kFull : kReduced;
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
    frame[id] = f != kUnset ? f : reduced_scalar && nd.type.rank() == 0 ? kReduced : kUnset;
  }
  // Users before their operands: a value without a frame takes its users'
  // (a class label [N] that a reshape brings to [N, 1] is one per row); one
  // no user needs a frame for is full (an output).
  std::vector<bool> free(n);
  for (int32_t id = 0; id < n; ++id) free[id] = frame[id] == kUnset;
  for (int32_t id = n - 1; id >= 0; --id) {
    const Node& nd = c.nodes[id];
    if (nd.kind == OpKind::kInput || nd.kind == OpKind::kConstant) continue;
    if (frame[id] == kUnset) frame[id] = kFull;
    const int unit = TrailingUnit(c, nd);
    const Frame want = IsReduction(nd.kind) ? kFull
                       : unit != 0          ? (unit > 0 ? kReduced : kFull)
                                            : frame[id];
    for (int32_t a : nd.args) {
      if (!free[a] || c.nodes[a].kind == OpKind::kConstant) continue;
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
    if (!Broadcasts(nd.type, f)) {
      // Named with the input's name: a norm weight of the wrong length, say.
      return validate_internal::Unsupported(
          c, id, "shape",
          absl::StrCat(validate_internal::ShapeString(c, nd.type.shape), " does not broadcast to the rows' ",
                       validate_internal::ShapeString(c, f)));
    }
    if (nd.kind == OpKind::kInput) {
      r.cls[id] = frame[id] == kFull && nd.type.rank() > 0 && nd.type.shape.back() == r.width
                      ? Class::kElement
                      : Class::kRow;
      continue;
    }
    if (IsReduction(nd.kind)) {
      // Its operand must be the row's elements: per-row values (another
      // reduction's results, when the rows are one wide) are reduced by a
      // kernel that reads them stored, as its rows.
      if (r.cls[nd.args[0]] != Class::kElement) return NotRow(c, id, "reduces per-row values");
      r.cls[id] = Class::kRow;
      r.level[id] = r.level[nd.args[0]] + 1;
      continue;
    }
    if (nd.kind == OpKind::kIota) {
      r.cls[id] = Class::kElement;
      continue;
    }
    if (TrailingUnit(c, nd) != 0 && r.cls[nd.args[0]] == Class::kElement) {
      return NotRow(c, id, "reshapes a full row");
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
