#include "codegen/generators.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "codegen/attention.h"
#include "codegen/matmul.h"
#include "codegen/pointwise.h"
#include "codegen/reduce.h"
#include "codegen/row.h"
#include "codegen/subchain.h"

namespace kfuse {
namespace {

absl::Status NoGenerator(Family f) {
  return absl::UnimplementedError(
      absl::StrCat("no generator for family ", std::string(FamilyName(f))));
}

// The pointwise generator writes, besides its outputs, every group node that
// a node outside the group consumes. In a plan of several kernels, nodes
// outside the group also belong to earlier kernels, which recompute what
// they need rather than read it; only the group's intermediates are read by
// later kernels. So the pointwise generator sees a chain in which nodes
// outside the group consume the group's intermediates and nothing else of
// it. Node ids, types and everything the group computes are unchanged.
const Chain& PointwiseView(const Chain& chain, const KernelGroup& group, Chain* storage) {
  const std::set<int32_t> mine(group.nodes.begin(), group.nodes.end());
  const std::set<int32_t> shared(group.intermediates.begin(), group.intermediates.end());
  auto hidden = [&](int32_t id, int32_t arg) {
    return !mine.count(id) && mine.count(arg) && !shared.count(arg);
  };
  bool any = false;
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()) && !any; ++id) {
    for (int32_t a : chain.nodes[id].args) any = any || hidden(id, a);
  }
  if (!any) return chain;
  *storage = chain;
  for (int32_t id = 0; id < static_cast<int32_t>(storage->nodes.size()); ++id) {
    std::vector<int32_t>& args = storage->nodes[id].args;
    std::vector<int32_t> kept;
    for (int32_t a : args) {
      if (!hidden(id, a)) kept.push_back(a);
    }
    args = std::move(kept);
  }
  return *storage;
}

// The row and attention generators see their chain as one kernel: such a
// group of a plan of several kernels (reading a product's result, or
// storing a matmul's operand; an attention between projections) is shown
// as a chain of its own, and its kernel renumbered back.
// Whether `group` is its chain's one kernel, generated from the chain as it
// is: it computes every node (an attention: the chain is one, its views of
// the inputs read as strides, which no group lists).
bool Whole(const Chain& chain, const KernelGroup& group) {
  return CoversChain(chain, group) ||
         (group.family == Family::kAttention && MatchAttention(chain).has_value());
}

absl::StatusOr<KernelSpec> EmitWhole(const Chain& chain, const KernelGroup& group, const Variant& variant,
                                     Numerics numerics) {
  return group.family == Family::kAttention ? EmitAttention(chain, group, variant, numerics)
                                            : EmitRow(chain, group, variant, numerics);
}

absl::StatusOr<KernelSpec> EmitIsolated(const Chain& chain, const KernelGroup& group,
                                        const Variant& variant, Numerics numerics) {
  if (Whole(chain, group)) return EmitWhole(chain, group, variant, numerics);
  KFUSE_ASSIGN_OR_RETURN(SubChain sub, Isolate(chain, group));
  KFUSE_ASSIGN_OR_RETURN(KernelSpec k, EmitWhole(sub.chain, sub.group, variant, numerics));
  KFUSE_RETURN_IF_ERROR(sub.Restore(&k));
  k.ops.assign(group.nodes.begin(), group.nodes.end());
  return k;
}

// The most `e` can be with each symbol at most its declared max (sizes are
// not negative, so a difference is at most its first term); -1: unbounded.
int64_t Bound(const SizeExpr& e, const Chain& chain) {
  using K = SizeExpr::Kind;
  if (e.kind() == K::kConst) return e.value();
  if (e.kind() == K::kSymbol) {
    const int64_t max = e.value() < static_cast<int64_t>(chain.symbols.size()) ? chain.symbols[e.value()].max : 0;
    return max > 0 ? max : -1;
  }
  const int64_t a = Bound(e.lhs(), chain), b = Bound(e.rhs(), chain);
  constexpr int64_t kBig = int64_t{1} << 62;
  switch (e.kind()) {
    case K::kMin: return a < 0 ? b : b < 0 ? a : std::min(a, b);
    case K::kSub: return a;
    case K::kCeilDiv: {
      const int64_t d = e.rhs().is_const() ? e.rhs().value() : 0;
      return a < 0 || d <= 0 ? -1 : (a + d - 1) / d;
    }
    case K::kAdd: return a < 0 || b < 0 || a > kBig - b ? -1 : a + b;
    case K::kMax: return a < 0 || b < 0 ? -1 : std::max(a, b);
    case K::kMul: return a < 0 || b < 0 || (b != 0 && a > kBig / b) ? -1 : a * b;
    default: return -1;
  }
}

// A grid past what a launch takes (kMaxGridDims) is refused where its size
// is static, naming the kernel's last op, and is a precondition where it
// follows symbols and is not bounded below the limit: no plan is stored
// that no GPU could launch.
absl::Status BoundGrid(const Chain& chain, const KernelGroup& group, KernelSpec* k) {
  const SizeExpr* dims[3] = {&k->grid.x, &k->grid.y, &k->grid.z};
  for (int i = 0; i < 3; ++i) {
    const char* axis = i == 0 ? "x" : i == 1 ? "y" : "z";
    if (dims[i]->is_const()) {
      if (dims[i]->value() <= kMaxGridDims[i]) continue;
      const std::string what = group.nodes.empty() ? "the kernel" : OpLabel(chain, group.nodes.back());
      return absl::UnimplementedError(absl::StrCat(what, ": its kernel would launch ", dims[i]->value(),
                                                   " blocks along ", axis, ", past a grid's ",
                                                   kMaxGridDims[i]));
    }
    const int64_t bound = Bound(*dims[i], chain);
    if (bound >= 0 && bound <= kMaxGridDims[i]) continue;
    const bool stated = std::any_of(k->preconditions.begin(), k->preconditions.end(), [&](const Precondition& p) {
      return p.kind == Precondition::Kind::kAtMost && p.expr == *dims[i] && p.value <= kMaxGridDims[i];
    });
    if (stated) continue;  // The family's own (the matmul's batch on z).
    Precondition c;
    c.kind = Precondition::Kind::kAtMost;
    c.expr = *dims[i];
    c.value = kMaxGridDims[i];
    c.description = absl::StrCat("the grid is at most ", kMaxGridDims[i], " blocks along ", axis);
    k->preconditions.push_back(std::move(c));
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelSpec> EmitUnbounded(const Chain& chain, const KernelGroup& group,
                                         const Variant& variant, Numerics numerics) {
  Chain view;
  switch (group.family) {
    case Family::kPointwise:
      return EmitPointwise(PointwiseView(chain, group, &view), group, variant, numerics);
    case Family::kRowReduction:
    case Family::kAttention: return EmitIsolated(chain, group, variant, numerics);
    case Family::kReduction: return EmitReduce(chain, group, variant, numerics);
    case Family::kMatmul: return EmitMatmul(chain, group, variant, numerics);
    default: return NoGenerator(group.family);
  }
}

}  // namespace

absl::StatusOr<KernelSpec> EmitFamily(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant, Numerics numerics) {
  KFUSE_ASSIGN_OR_RETURN(KernelSpec k, EmitUnbounded(chain, group, variant, numerics));
  // The yardsticks' grids may be larger than the kernel's (one row a block);
  // the launch checks them, and a yardstick too large is the tuner's error,
  // not the chain's.
  if (numerics == Numerics::kFast) KFUSE_RETURN_IF_ERROR(BoundGrid(chain, group, &k));
  return k;
}

absl::Status CanGenerateFamily(const Chain& chain, const KernelGroup& group,
                               const Variant& variant) {
  Chain view;
  switch (group.family) {
    case Family::kPointwise:
      return CanGenerate(PointwiseView(chain, group, &view), group, variant);
    case Family::kRowReduction:
    case Family::kAttention: {
      auto can = [&](const Chain& c, const KernelGroup& g) {
        return g.family == Family::kAttention ? CanGenerateAttention(c, g, variant) : CanGenerateRow(c, g, variant);
      };
      if (Whole(chain, group)) return can(chain, group);
      KFUSE_ASSIGN_OR_RETURN(SubChain sub, Isolate(chain, group));
      return can(sub.chain, sub.group);
    }
    case Family::kReduction: return CanGenerateReduce(chain, group, variant);
    case Family::kMatmul: return CanGenerateMatmul(chain, group, variant);
    default: return NoGenerator(group.family);
  }
}

Variant FamilyHeuristic(const Chain& chain, const KernelGroup& group) {
  Chain view;
  switch (group.family) {
    case Family::kPointwise: return PointwiseHeuristic(PointwiseView(chain, group, &view), group);
    case Family::kRowReduction:
    case Family::kAttention: {
      auto heuristic = [](const Chain& c, const KernelGroup& g) {
        return g.family == Family::kAttention ? AttentionHeuristic(c, g) : RowHeuristic(c, g);
      };
      if (Whole(chain, group)) return heuristic(chain, group);
      absl::StatusOr<SubChain> sub = Isolate(chain, group);
      return sub.ok() ? heuristic(sub->chain, sub->group) : Variant{group.family, {}};
    }
    case Family::kReduction: return ReduceHeuristic(chain, group);
    case Family::kMatmul: return MatmulHeuristic(chain, group);
    default: return Variant{group.family, {}};
  }
}

std::vector<Variant> FamilySpace(const Chain& chain, const KernelGroup& group) {
  Chain view;
  switch (group.family) {
    case Family::kPointwise: return PointwiseSpace(PointwiseView(chain, group, &view), group);
    case Family::kRowReduction:
    case Family::kAttention: {
      auto space = [](const Chain& c, const KernelGroup& g) {
        return g.family == Family::kAttention ? AttentionSpace(c, g) : RowSpace(c, g);
      };
      if (Whole(chain, group)) return space(chain, group);
      absl::StatusOr<SubChain> sub = Isolate(chain, group);
      return sub.ok() ? space(sub->chain, sub->group) : std::vector<Variant>{};
    }
    case Family::kReduction: return ReduceSpace(chain, group);
    case Family::kMatmul: return MatmulSpace(chain, group);
    default: return {};
  }
}

int VariantMinComputeCapability(const Variant& variant) {
  switch (variant.family) {
    case Family::kRowReduction: return RowMinComputeCapability(variant);
    case Family::kMatmul: return MatmulMinComputeCapability(variant);
    default: return 80;
  }
}

bool ReferenceReadsIntermediatesAsDouble(Family family) {
  return family == Family::kPointwise || family == Family::kReduction ||
         family == Family::kRowReduction;
}

std::string GeneratorVersion(Family family) {
  switch (family) {
    case Family::kPointwise: return kPointwiseGeneratorVersion;
    case Family::kRowReduction: return kRowGeneratorVersion;
    case Family::kReduction: return kReduceGeneratorVersion;
    case Family::kMatmul: return kMatmulGeneratorVersion;
    case Family::kAttention: return kAttentionGeneratorVersion;
    default: return "";
  }
}

std::string VariantSchemaVersion(Family family) {
  switch (family) {
    case Family::kPointwise: return kPointwiseVariantSchema;
    case Family::kRowReduction: return kRowVariantSchema;
    case Family::kReduction: return kReduceVariantSchema;
    case Family::kMatmul: return kMatmulVariantSchema;
    case Family::kAttention: return kAttentionVariantSchema;
    default: return "";
  }
}

}  // namespace kfuse
