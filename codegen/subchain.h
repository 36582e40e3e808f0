// A kernel group of a plan as a chain of its own, for generators that see a
// whole chain as one kernel (the row family): the values the group reads
// from earlier kernels become inputs, what it writes becomes outputs, and
// the kernel it emits is renumbered back to the plan's buffers.
//
//   KFUSE_ASSIGN_OR_RETURN(SubChain s, Isolate(chain, group));
//   KFUSE_ASSIGN_OR_RETURN(KernelSpec k, EmitRow(s.chain, s.group, v));
//   KFUSE_RETURN_IF_ERROR(s.Restore(&k));   // buffers of `chain`'s plan
#ifndef KFUSE_CODEGEN_SUBCHAIN_H_
#define KFUSE_CODEGEN_SUBCHAIN_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"

namespace kfuse {

struct SubChain {
  // Inputs: every input of the whole chain (same numbers), then one per
  // intermediate the group reads (dense, ascending node id), then one per
  // InputView it reads (ascending node id). Outputs: the
  // chain outputs the group writes (in chain order), then the intermediates
  // it writes for later kernels (ascending). Symbols as the whole chain's.
  Chain chain;
  KernelGroup group;  // Every computed node of `chain`; its outputs as results.
  std::vector<BufferRef> inputs;   // Per input of `chain`: the plan's buffer.
  std::vector<BufferRef> outputs;  // Per output of `chain`: the plan's buffer.

  // Renames the buffers `spec` names (parameters and preconditions) from
  // `chain`'s numbering to the plan's; Internal for a buffer it lacks.
  absl::Status Restore(KernelSpec* spec) const;
};

// A slice (or slices of slices) of a chain input, seen as that input read at
// strides of its own: a row of a padded tensor, one of a fused projection's
// parts. Its element strides and the offset of its element 0 in the input's
// buffer.
struct InputView {
  int32_t input = -1;  // The chain input's node.
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// Node `id` of validated, canonical `chain` as an InputView: slices of a
// chain input, the last axis at step 1, and reshapes of static shapes that
// are views of them (a group norm's [N, C, H, W] as [N, G, C / G * H * W]),
// the last dim at stride 1, every stride a static number; nullopt otherwise.
std::optional<InputView> AsInputView(const Chain& chain, int32_t id);

// The ops an InputView is made of.
inline bool IsInputViewStep(OpKind k) { return k == OpKind::kSlice || k == OpKind::kReshape; }

// Whether a row kernel reads node `id` in place, as an InputView (Isolate
// makes it an input at strides of its own): a slice of a chain input (one of
// a fused projection's parts, rows past a start row, a vocabulary padded
// from 50257 to 50304), read with the dense rows' vectors where every row
// keeps their phase and element by element where it does not (the padded
// vocabulary: one pass at 408 us on an H100 against 659 for the slice
// stored first by a pointwise kernel, which cannot read it by vectors
// either; h100-run235). Not a chain output, nor a slice of a slice
// something else reads too.
bool ReadInPlace(const Chain& chain, int32_t id);

// Whether `group` computes every computed node of `chain` and reads no
// InputView it reads in place (Isolate makes those inputs of its own):
// then it needs no isolating.
bool CoversChain(const Chain& chain, const KernelGroup& group);

// `group` of validated, canonical `chain` as a chain of its own, each
// InputView it reads in place (and does not write) an input of that chain
// at its strides and offset, on the viewed input's buffer. Errors from validating
// the result (Internal: the group was not closed).
absl::StatusOr<SubChain> Isolate(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_SUBCHAIN_H_
