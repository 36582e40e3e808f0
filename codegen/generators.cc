#include "codegen/generators.h"

#include "absl/strings/str_cat.h"
#include "codegen/pointwise.h"
#include "codegen/row.h"

namespace kfuse {
namespace {

absl::Status NoGenerator(Family f) {
  return absl::UnimplementedError(
      absl::StrCat("no generator for family ", std::string(FamilyName(f))));
}

}  // namespace

absl::StatusOr<KernelSpec> EmitFamily(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant, Numerics numerics) {
  switch (group.family) {
    case Family::kPointwise: return EmitPointwise(chain, group, variant, numerics);
    case Family::kRowReduction: return EmitRow(chain, group, variant, numerics);
    default: return NoGenerator(group.family);
  }
}

absl::Status CanGenerateFamily(const Chain& chain, const KernelGroup& group,
                               const Variant& variant) {
  switch (group.family) {
    case Family::kPointwise: return CanGenerate(chain, group, variant);
    case Family::kRowReduction: return CanGenerateRow(chain, group, variant);
    default: return NoGenerator(group.family);
  }
}

Variant FamilyHeuristic(const Chain& chain, const KernelGroup& group) {
  switch (group.family) {
    case Family::kPointwise: return PointwiseHeuristic(chain, group);
    case Family::kRowReduction: return RowHeuristic(chain, group);
    default: return Variant{group.family, {}};
  }
}

std::vector<Variant> FamilySpace(const Chain& chain, const KernelGroup& group) {
  switch (group.family) {
    case Family::kPointwise: return PointwiseSpace(chain, group);
    case Family::kRowReduction: return RowSpace(chain, group);
    default: return {};
  }
}

std::string GeneratorVersion(Family family) {
  switch (family) {
    case Family::kPointwise: return kPointwiseGeneratorVersion;
    case Family::kRowReduction: return kRowGeneratorVersion;
    default: return "";
  }
}

}  // namespace kfuse
