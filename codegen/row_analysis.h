// The row structure of a chain whose reductions all run along the innermost
// axis: which values vary along the row, which are one value per row, and in
// which phase each reduction can run. The row family's generator and the
// partitioner read it; it is found by shape analysis, not by op names.
//
//   absl::StatusOr<RowStructure> r = AnalyzeRows(chain);
//   // softmax: r->phases == {{max}, {sum}}, r->width == W.
#ifndef KFUSE_CODEGEN_ROW_ANALYSIS_H_
#define KFUSE_CODEGEN_ROW_ANALYSIS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"

namespace kfuse {

struct RowStructure {
  enum class Class : uint8_t {
    kNone,     // Not computed by the kernel's element loop (unused).
    kElement,  // Varies along the row: one value per element.
    kRow,      // One value per row (reductions and what follows from them).
    kUniform,  // The same everywhere (constants, rank-0 inputs).
  };
  // The reductions' operand shape [d0, ..., d(k-2), W]; rows = d0*...*d(k-2).
  std::vector<Dim> row_shape;
  Dim width;
  std::vector<Class> cls;     // Per node.
  // Per node: the phase after which its value is known (0: before any
  // reduction). Reductions of phase p run in pass p over the row.
  std::vector<int> level;
  // Per node: true when its shape is aligned against row_shape without its
  // last dim (results of non-keepdim reductions and what is computed from
  // them); false when aligned against row_shape.
  std::vector<bool> reduced_frame;
  // phases[p - 1]: the reduction node ids of phase p, ascending.
  std::vector<std::vector<int32_t>> phases;
};

// +1 for a reshape that appends one trailing unit dim ([N] to [N, 1]), -1
// for one that drops it ([N, 1] to [N]), 0 for any other node: the only
// views a row kernel takes (a per-row value between its frames).
int TrailingUnit(const Chain& c, const Node& nd);

// For a validated, canonical chain with at least one reduction; inputs may
// be strided (row kernels read them at their strides). Unimplemented
// (naming the op) when a reduction runs over an outer axis or over several
// axes, operands differ in row shape, an op is a layout view or matmul, a
// value mixes the per-row and full frames, or an output neither is a full
// row nor holds one value per row.
absl::StatusOr<RowStructure> AnalyzeRows(const Chain& chain);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_ROW_ANALYSIS_H_
