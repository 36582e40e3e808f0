// Layout views as index arithmetic, so a chain with slices, permutes,
// reshapes, expands and concats is still one pointwise kernel: every view is
// pushed down through the element-wise ops (a view of f(a, b) is
// f(view a, view b)) until it reaches a buffer, where it becomes that read's
// strides and offset (slice: offset + start * stride, stride * step; permute:
// permuted strides; reshape: strides recomputed per group of merged or split
// dims; expand: zero strides), and a concat becomes a choice between its
// pieces by the coordinate along its axis. Internal to the pointwise
// generator (pointwise_layout.cc builds its iteration space from this).
//
//   absl::StatusOr<ViewProgram> p = ResolveViews(chain, in_group, {out_node}, iter, iter);
//   p->terms[p->roots[0]];   // the output's value: loads, ops and selects
#ifndef KFUSE_CODEGEN_POINTWISE_VIEWS_H_
#define KFUSE_CODEGEN_POINTWISE_VIEWS_H_

#include <cstdint>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/pointwise_layout.h"

namespace kfuse::pointwise_internal {

struct ViewProgram {
  // Reads, strides over the dims of `iter` (not collapsed), ordered by
  // buffer (chain inputs, then intermediates; ascending index), then first
  // use. dense and uniform are not set.
  std::vector<Operand> loads;
  std::vector<Cond> conds;        // Strides over the dims of `iter`.
  std::vector<Term> terms;        // Ascending node; Term::operand indexes `loads`.
  std::vector<int32_t> roots;     // Parallel to the roots asked for.
  std::vector<int32_t> computed;  // Group nodes (not inputs) the roots depend on, ascending.
};

// The values of `roots` (nodes of validated `chain`, each broadcast to the
// shape `iter`, then reshaped row-major to `over`, the kernel's iteration
// shape: `iter` itself, or `iter` with dims split, so that a reshape in the
// group that merges dims no view can merge, as a concat's axis into its
// neighbour, is undone there) per element of `over`. Nodes in `in_group` are computed
// (constants should be there); other nodes are read: chain inputs with their
// strides, anything else from a dense intermediate buffer. A node reached
// through two different views is computed once per view.
// Errors: Unimplemented naming the op for iota, reductions, matmul, a
// reshape that is not a view of its operand, or views that would need more
// than 4096 values per element.
absl::StatusOr<ViewProgram> ResolveViews(const Chain& chain, const std::set<int32_t>& in_group,
                                         const std::vector<int32_t>& roots,
                                         const std::vector<Dim>& iter,
                                         const std::vector<Dim>& over);

// `strides` (over the dims of `from`) over those of `to`, a row-major
// reshape of it; Unimplemented, naming `node`, where it merges dims that are
// not evenly spaced.
absl::StatusOr<std::vector<Mono>> ReshapeStrides(const Chain& chain, int32_t node,
                                                 const std::vector<Dim>& from,
                                                 const std::vector<Dim>& to,
                                                 std::vector<Mono> strides);

}  // namespace kfuse::pointwise_internal

#endif  // KFUSE_CODEGEN_POINTWISE_VIEWS_H_
