// One entry point per generator operation, dispatching on the kernel group's
// family, so the service and the tuner need not know every family.
//
//   KFUSE_ASSIGN_OR_RETURN(KernelSpec k, EmitFamily(chain, group, variant));
//   std::string version = GeneratorVersion(group.family);   // "reduce/5"
#ifndef KFUSE_CODEGEN_GENERATORS_H_
#define KFUSE_CODEGEN_GENERATORS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

// EmitPointwise, EmitRow, EmitReduce, EmitMatmul or EmitAttention by group.family; Unimplemented for
// families without a generator. Use these rather than a family's own entry
// points for groups of a plan of several kernels: the pointwise generator is
// shown only the group's intermediates as read by other kernels (nodes other
// kernels recompute are not written back to memory).
absl::StatusOr<KernelSpec> EmitFamily(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant,
                                      Numerics numerics = Numerics::kFast);
absl::Status CanGenerateFamily(const Chain& chain, const KernelGroup& group,
                               const Variant& variant);
Variant FamilyHeuristic(const Chain& chain, const KernelGroup& group);
std::vector<Variant> FamilySpace(const Chain& chain, const KernelGroup& group);
// The least compute capability (major * 10 + minor) `variant` runs on: 80
// (the service's floor) unless it uses a later GPU's features (clusters,
// bulk copies).
int VariantMinComputeCapability(const Variant& variant);

// "pointwise/1", "row/17", "reduce/5"; "" for families without a generator. Part of the
// cache key: a generator change must not serve stale decisions.
std::string GeneratorVersion(Family family);

// Whether the family's kReference64 kernels read intermediates (earlier
// kernels' results) as double, as a plan emitted wholly in kReference64
// writes them: pointwise, reduction and row kernels do; matmul and
// attention kernels read them in their own dtype. The tuner checks one
// kernel at a time over intermediates of their dtype, and widens them for
// the references that read double.
bool ReferenceReadsIntermediatesAsDouble(Family family);

// "pointwise-variants/1", ...: the meaning of the family's variant
// parameters. Tuning decisions are keyed by it rather than by the generator
// version, so a new generator that keeps its variant schema reuses them.
std::string VariantSchemaVersion(Family family);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_GENERATORS_H_
