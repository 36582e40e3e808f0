// The decisions behind one pointwise kernel, made once and shared by the
// legality check, the launch contract and the source writer: how each buffer
// is accessed, the index type, the preconditions the launcher must check.
// Internal to the pointwise generator.
#ifndef KFUSE_CODEGEN_POINTWISE_PLAN_H_
#define KFUSE_CODEGEN_POINTWISE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/emit_scalar.h"
#include "codegen/pointwise_layout.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse::pointwise_internal {

// How the `vec` lanes of one vector reach a buffer.
enum class Access : uint8_t {
  kVector,   // One aligned vector access at the lanes' first offset.
  kContig,   // Consecutive elements, scalar accesses (not provably aligned).
  kStrided,  // Lane j at offset + j * inner stride.
  kOnce,     // Inner stride 0: one element shared by every lane (a store
             // is done by lane 0 of the vector at the row's start).
};

struct Plan {
  IterSpace space;
  Numerics numerics = Numerics::kFast;
  int vec = 1, items = 1, block = 256;
  int64_t grid = 0;  // 0: one pass; else the most blocks, grid-stride.
  bool idx32 = false;
  std::vector<Access> in_access, out_access;  // Parallel to space.inputs/outputs.
  std::vector<Precondition> preconditions;
};

// Checks `variant` against the group and makes every decision.
absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics);

// The kernel's source (entry name already substituted) and entry name.
struct Source {
  std::string entry;
  std::string text;
};
absl::StatusOr<Source> WriteSource(const Chain& chain, const Plan& plan);

}  // namespace kfuse::pointwise_internal

#endif  // KFUSE_CODEGEN_POINTWISE_PLAN_H_
