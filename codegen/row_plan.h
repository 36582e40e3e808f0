// Internal to the row family: the checked plan the emitter writes from.
#ifndef KFUSE_CODEGEN_ROW_PLAN_H_
#define KFUSE_CODEGEN_ROW_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "codegen/row_analysis.h"
#include "core/launch.h"

namespace kfuse::row_internal {

struct Plan {
  RowStructure rows;
  Numerics numerics = Numerics::kFast;
  int vec = 1, threads = 32, rows_per_block = 1;
  bool resident = false;
  // A static width that is not a multiple of vec: each row's first aligned
  // column starts the vectors (looped: the loop; resident: the registers),
  // the few columns around them one by one (see row_emit.cc).
  bool peel = false;
  // resident=2: bytes of dynamic shared memory for the staged rows (0: none)
  // and each staged row's length in elements (a multiple of 16, room for the
  // peel's shift).
  int stage_bytes = 0;
  int64_t stage_stride = 0;
  // resident=3 (sm_90): persistent blocks, at most `grid` of them, each
  // looping over rows; a row's per-row inputs arrive whole in one of
  // `stages` shared-memory buffers by bulk copies (each input's buffer b at
  // kf_smem + (input's rank in held_inputs * stages + b) * stage_stride
  // elements), issued `stages` rows ahead. The buffer holds the row's
  // vectors (columns kf_h to kf_h + kf_nv * vec - 1); a peeled row's few
  // columns around them are loaded from global memory at the row's start,
  // one a thread.
  bool bulk = false;
  int stages = 1;
  int64_t grid = 0;
  // dyn=1: a bulk-staged block takes its next row from a 32-bit counter in
  // a zeroed workspace (the kernel's last parameter) instead of every
  // gridDim.x-th row, so blocks that stream faster take more rows.
  bool dyn = false;
  // A peeled row's vectors start at the first column whose element offset
  // is a multiple of `align`: vec, or for bulk rows 128 bytes' worth (a
  // line where the buffers are 128-byte aligned, so each warp's stores
  // cover whole lines).
  int align = 1;
  int items = 0;                        // Resident: vectors per thread.
  // split > 1: each row is split over a cluster of `split` blocks (sm_90),
  // block q of a row holding, register-resident, the row's aligned vectors
  // q * split_vectors to (q + 1) * split_vectors - 1.
  int split = 1;
  int64_t split_vectors = 0;
  // slices > 1: each row is split over `slices` blocks of the grid (y; a
  // launch of many rows takes fewer, EmitRow), block q reading the row's
  // columns from q * span (span: the row's vectors over the slices, in
  // elements); its value of each reduction goes
  // to a workspace, and the row's last block to finish (a counter a row,
  // zeroed before the launch) combines them and writes the row's outputs.
  // For rows read in one pass with per-row outputs only (SlicedReductions),
  // looped: few rows of many elements, which one block a row leaves on a
  // few SMs (a 1-D total is one row).
  int slices = 1;
  int sliced_reductions = 0;
  int resident_param = 0;               // The variant's, for the source's header.
  // policy=1 (resident rows): the row's loads mark its lines L2
  // evict_last (the variant's `policy`; 0 under the fp64 yardstick).
  int policy = 0;
  std::vector<int32_t> elem_inputs;     // Input node ids read per element.
  // Resident: the element inputs held in registers for the whole row (those
  // that differ from row to row); the rest (a norm's weight, say) are read
  // where they are used, from cache.
  std::vector<int32_t> held_inputs;
  // vec > 1: the per-element inputs whose rows do not start at the dense
  // rows' phase (a padded vocabulary's slice, a norm's weight beside a
  // peeled row): each vector of theirs is read as the two aligned vectors
  // that hold its first and last elements, shifted into place (kf_ldw).
  // Bulk-staged, such an input's row is copied from the 16-byte unit that
  // holds its first element, and its vectors are read from the buffer
  // through windows too.
  std::vector<int32_t> window_inputs;
  bool Windowed(int32_t id) const {
    return std::find(window_inputs.begin(), window_inputs.end(), id) != window_inputs.end();
  }
  std::vector<int32_t> symbols;         // Symbols of the row shape, ascending.
  std::vector<Precondition> preconditions;
};

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics);

// The widest per-element value (inputs read per element, by their dtype, not
// a wider buffer's: Node::storage; full-row outputs).
int WidestElementBytes(const Chain& chain, const RowStructure& rows);

struct Source {
  std::string entry, text;
};
absl::StatusOr<Source> WriteSource(const Chain& chain, const Plan& plan);

// How many passes over each row the kernel of `plan` makes (a looped row
// reads its inputs from memory in each).
int Passes(const Chain& chain, const Plan& plan);

// The reductions of a row kernel that may be sliced (Plan::slices): those
// of its one phase, where that phase is read in one plain pass and every
// output is per row; 0 otherwise.
int SlicedReductions(const Chain& chain, const Plan& plan);

}  // namespace kfuse::row_internal

#endif  // KFUSE_CODEGEN_ROW_PLAN_H_
