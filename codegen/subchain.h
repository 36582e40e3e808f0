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

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"

namespace kfuse {

struct SubChain {
  // Inputs: every input of the whole chain (same numbers), then one per
  // intermediate the group reads (dense, ascending node id). Outputs: the
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

// Whether `group` computes every computed node of `chain` (then it needs no
// isolating).
bool CoversChain(const Chain& chain, const KernelGroup& group);

// `group` of validated, canonical `chain` as a chain of its own. Errors from
// validating the result (Internal: the group was not closed).
absl::StatusOr<SubChain> Isolate(const Chain& chain, const KernelGroup& group);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_SUBCHAIN_H_
