// Splits a canonical chain into the kernels that compute it, each tagged with
// the family whose generator emits it and the reason its boundary is drawn.
//
//   KFUSE_ASSIGN_OR_RETURN(Partition p, PartitionChain(canonical));
//   for (const KernelGroup& k : p.kernels) EmitPointwise(canonical, k, variant);
#ifndef KFUSE_CODEGEN_PARTITION_H_
#define KFUSE_CODEGEN_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "core/variant.h"

namespace kfuse {

// One kernel of a plan.
struct KernelGroup {
  Family family = Family::kInvalid;
  // Node ids the kernel computes, ascending. Chain inputs and constants it
  // reads are not listed; its operands are chain inputs, constants, or nodes
  // of earlier kernels (listed in Partition::intermediates).
  std::vector<int32_t> nodes;
  // Nodes whose values leave this kernel: chain outputs and intermediates
  // that later kernels read, ascending.
  std::vector<int32_t> results;
  std::string reason;  // Why the boundary is here, for the plan and logs.
};

struct Partition {
  std::vector<KernelGroup> kernels;  // In launch order.
  // Node ids materialised in HBM between kernels (empty with one kernel).
  std::vector<int32_t> intermediates;
};

// For a canonical chain. Today: a chain of inputs, constants and element-wise
// ops (casts, where, comparisons included) is one pointwise kernel; a chain
// whose reductions all run along the innermost axis of one row shape, with
// element-wise work around them, is one row kernel (see AnalyzeRows for what
// answers Unimplemented, e.g. "reductions over an outer axis are not
// generated yet"); the first layout view or matmul answers Unimplemented,
// naming the op.
absl::StatusOr<Partition> PartitionChain(const Chain& canonical);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_PARTITION_H_
