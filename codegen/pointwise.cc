#include "codegen/pointwise.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/pointwise_plan.h"
#include "core/status.h"

namespace kfuse {
namespace pointwise_internal {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int StorageBytes(DType t, Numerics n, bool is_output) {
  return (is_output && n == Numerics::kReference64) ? 8 : DTypeBytes(t);
}

// Whether `o` can be moved as vectors: consecutive along the lanes. Others
// are read once a vector (uniform, or broadcast along the innermost dim) or
// element by element (strided), whatever their width.
bool LaneConsecutive(const Operand& o) {
  return !o.uniform && o.strides.back() == Mono{1, {}};
}

// The widest element a vector of the variant moves. An earlier kernel's
// 16-bit result kept in f32 (IntermediateDType) counts as its 16-bit value:
// it is a broadcast row, and its vectors may take two 16-byte loads rather
// than halve every other operand's.
int WidestBytes(const Chain& c, const IterSpace& s, Numerics n) {
  int w = 1;
  for (const Operand& o : s.inputs) {
    if (!LaneConsecutive(o)) continue;
    const DType t = o.buffer.kind == BufferRef::Kind::kIntermediate ? c.nodes[o.node].type.dtype
                                                                    : o.dtype;
    w = std::max(w, StorageBytes(t, n, false));
  }
  for (const Operand& o : s.outputs) {
    if (LaneConsecutive(o)) w = std::max(w, StorageBytes(o.dtype, n, true));
  }
  return w;
}

bool Contains(std::initializer_list<int64_t> set, int64_t v) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

absl::Status BadParam(const Variant& v, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("variant ", v.ToString(), ": ", what));
}

// `m` is a multiple of vec: by its coefficient, or as a multiple of the
// innermost dim, which is one when the space has several dims (statically,
// or by a kDivisible precondition).
bool DivisibleByVec(const Mono& m, const IterSpace& s, int vec) {
  return m.coef % vec == 0 || (s.sizes.size() > 1 && IsMultipleOf(m, s.sizes.back()));
}

// Every stride but the innermost, and the offset, are multiples of vec.
bool OuterDivisible(const std::vector<Mono>& strides, const Poly& offset, const IterSpace& s,
                    int vec) {
  for (size_t d = 0; d + 1 < strides.size(); ++d) {
    if (!DivisibleByVec(strides[d], s, vec)) return false;
  }
  for (const Mono& m : offset) {
    if (!DivisibleByVec(m, s, vec)) return false;
  }
  return true;
}

Access Classify(const Operand& o, const IterSpace& s, int vec) {
  if (vec == 1) return o.uniform ? Access::kOnce : Access::kVector;
  if (o.uniform) return Access::kOnce;
  const Mono& st = o.strides.back();
  if (st.is_zero()) return Access::kOnce;
  if (st == Mono{1, {}}) {
    return (o.dense || OuterDivisible(o.strides, o.offset, s, vec)) &&
                   std::all_of(o.offset.begin(), o.offset.end(),
                               [&](const Mono& m) { return DivisibleByVec(m, s, vec); })
               ? Access::kVector
               : Access::kContig;
  }
  return Access::kStrided;
}

// A cond takes one value across the vec lanes of a vector: the lanes step
// along the innermost dim only, so it holds when the cond does not depend on
// it, or steps through it one by one from a multiple of vec towards bounds
// that are multiples of vec. An iota's coordinate is no choice: the vector
// body steps it with the lanes.
bool LaneUniform(const Cond& c, const IterSpace& s, int vec) {
  if (vec == 1 || c.uniform || c.strides.back().is_zero() || c.coordinate) return true;
  if (c.strides.back() != Mono{1, {}} || !OuterDivisible(c.strides, c.offset, s, vec)) {
    return false;
  }
  return (!c.has_lo || c.lo % vec == 0) && (!c.has_hi || c.hi % vec == 0);
}

// Sum over dims of (size - 1) * stride, plus |offset|, at the symbols' max;
// -1 if unbounded.
int64_t MaxIndex(const std::vector<Mono>& strides, const Poly& offset, const IterSpace& s,
                 const Chain& chain) {
  int64_t total = 0;
  for (const Mono& m : offset) {
    int64_t v = UpperBound(m, chain);
    if (v < 0) return -1;
    total += v;
    if (total > (int64_t{1} << 62)) return -1;
  }
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d].is_zero()) continue;
    int64_t size = UpperBound(s.sizes[d], chain), stride = UpperBound(strides[d], chain);
    if (size < 0 || stride < 0) return -1;
    if (size > 1 && stride > (int64_t{1} << 62) / size) return -1;
    total += (size - 1) * stride;
    if (total > (int64_t{1} << 62)) return -1;
  }
  return total;
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics) {
  if (group.family != Family::kPointwise) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel group is ", std::string(FamilyName(group.family)), ", not pointwise"));
  }
  if (variant.family != Family::kPointwise) {
    return BadParam(variant, "family must be pointwise");
  }
  for (const auto& [name, value] : variant.params) {
    if (name != "vec" && name != "items" && name != "block" && name != "grid") {
      return BadParam(variant, absl::StrCat("unknown param \"", name, "\""));
    }
  }
  for (const char* name : {"vec", "items", "block", "grid"}) {
    if (!variant.params.count(name)) return BadParam(variant, absl::StrCat("missing ", name));
  }
  Plan p;
  p.numerics = numerics;
  const int64_t vec = variant.Get("vec"), items = variant.Get("items"),
                block = variant.Get("block"), grid = variant.Get("grid");
  if (!Contains({1, 2, 4, 8}, vec)) return BadParam(variant, "vec must be 1, 2, 4 or 8");
  if (!Contains({1, 2, 4}, items)) return BadParam(variant, "items must be 1, 2 or 4");
  if (!Contains({128, 256, 512, 1024}, block)) {
    return BadParam(variant, "block must be 128, 256, 512 or 1024");
  }
  if (grid < 0 || grid > kInt32Max) return BadParam(variant, "grid must be in [0, 2^31)");
  KFUSE_ASSIGN_OR_RETURN(p.space, BuildIterSpace(chain, group));
  const IterSpace& s = p.space;
  const int widest = WidestBytes(chain, s, Numerics::kFast);
  if (vec * widest > 16) {
    return BadParam(variant, absl::StrCat("vec ", vec, " of ", widest,
                                          "-byte elements exceeds 16-byte accesses"));
  }
  const Mono& inner = s.sizes.back();
  if (s.sizes.size() > 1 && inner.coef % vec != 0 && inner.is_static()) {
    return BadParam(variant, absl::StrCat("vec ", vec, " does not divide the innermost dim (",
                                          inner.coef, ") of a broadcast or strided access"));
  }
  // The reference is one element per thread, no vectors.
  const bool ref = numerics == Numerics::kReference64;
  p.vec = ref ? 1 : static_cast<int>(vec);
  p.items = ref ? 1 : static_cast<int>(items);
  p.block = static_cast<int>(block);
  p.grid = grid;

  if (s.sizes.size() > 1 && inner.coef % p.vec != 0) {
    Precondition c;
    c.kind = Precondition::Kind::kDivisible;
    c.expr = inner.ToExpr();
    c.value = p.vec;
    c.description = absl::StrCat("the innermost dim is a multiple of ", p.vec, " (vector access)");
    p.preconditions.push_back(std::move(c));
  }
  for (const Cond& c : s.conds) {
    if (!LaneUniform(c, s, static_cast<int>(vec))) {
      return BadParam(variant,
                      absl::StrCat("vec ", vec, " would split vectors between the pieces of ",
                                   OpLabel(chain, c.node),
                                   " (a piece boundary along the innermost dim is not a multiple "
                                   "of ", vec, "); use a narrower vec"));
    }
  }
  auto classify = [&](const std::vector<Operand>& ops, bool out, std::vector<Access>* acc) {
    for (const Operand& o : ops) {
      acc->push_back(Classify(o, s, p.vec));
      if (acc->back() != Access::kVector || p.vec == 1) continue;
      Precondition c;
      c.kind = Precondition::Kind::kAligned;
      c.buffer = o.buffer;
      c.value = int64_t{p.vec} * StorageBytes(o.dtype, numerics, out);
      const char* kind = o.buffer.kind == BufferRef::Kind::kInput    ? "input"
                         : o.buffer.kind == BufferRef::Kind::kOutput ? "output"
                                                                     : "intermediate";
      c.description = absl::StrCat(kind, " ", o.buffer.index, " is ", c.value,
                                   "-byte aligned (vector access)");
      // A buffer read through several views asks it once.
      if (std::none_of(p.preconditions.begin(), p.preconditions.end(),
                       [&](const Precondition& q) {
                         return q.kind == c.kind && q.buffer == c.buffer && q.value == c.value;
                       })) {
        p.preconditions.push_back(std::move(c));
      }
    }
  };
  classify(s.inputs, false, &p.in_access);
  classify(s.outputs, true, &p.out_access);

  // 32-bit indices when every index provably fits: the last pass may run
  // one pass's worth of elements past numel before its bounds check.
  const int64_t pass = block * vec * items * std::max<int64_t>(grid, 1);
  const int64_t numel = UpperBound(s.numel, chain);
  p.idx32 = numel >= 0 && numel + pass <= kInt32Max;
  for (const auto* ops : {&s.inputs, &s.outputs}) {
    for (const Operand& o : *ops) {
      int64_t m = MaxIndex(o.strides, o.offset, s, chain);
      if (m < 0 || m + pass > kInt32Max) p.idx32 = false;
    }
  }
  for (const Cond& c : s.conds) {
    int64_t m = MaxIndex(c.strides, c.offset, s, chain);
    if (m < 0 || m + pass > kInt32Max) p.idx32 = false;
  }
  if (p.idx32) {
    for (int32_t sym : s.symbols) {
      Precondition c;
      c.kind = Precondition::Kind::kAtMost;
      c.expr = SizeExpr::Symbol(static_cast<uint32_t>(sym));
      c.value = chain.symbols[sym].max;
      c.description = absl::StrCat("symbol ", sym, " is at most ", c.value, " (32-bit indexing)");
      p.preconditions.push_back(std::move(c));
    }
  }
  return p;
}

}  // namespace pointwise_internal

using pointwise_internal::MakePlan;
using pointwise_internal::Plan;

absl::Status CanGenerate(const Chain& chain, const KernelGroup& group, const Variant& variant) {
  return MakePlan(chain, group, variant, Numerics::kFast).status();
}

absl::StatusOr<KernelSpec> EmitPointwise(const Chain& chain, const KernelGroup& group,
                                         const Variant& variant, Numerics numerics) {
  KFUSE_ASSIGN_OR_RETURN(Plan plan, MakePlan(chain, group, variant, numerics));
  KFUSE_ASSIGN_OR_RETURN(pointwise_internal::Source src,
                         pointwise_internal::WriteSource(chain, plan));
  KernelSpec k;
  k.entry = std::move(src.entry);
  k.source = std::move(src.text);
  // Parameter order: chain inputs (all of them), intermediates read, buffers
  // written, symbols.
  for (int i = 0; i < chain.num_inputs(); ++i) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(i)}));
  }
  // An intermediate read directly and through views (x and x.reshape) is
  // several operands of one buffer: one parameter.
  std::set<std::pair<BufferRef::Kind, uint32_t>> read;
  for (const auto& o : plan.space.inputs) {
    if (o.buffer.kind != BufferRef::Kind::kInput && read.insert({o.buffer.kind, o.buffer.index}).second) {
      k.params.push_back(KernelParam::Buffer(o.buffer));
    }
  }
  for (const auto& o : plan.space.outputs) k.params.push_back(KernelParam::Buffer(o.buffer));
  for (int32_t sym : plan.space.symbols) {
    k.params.push_back(
        KernelParam::Scalar(SizeExpr::Symbol(static_cast<uint32_t>(sym)), DType::kI64));
  }
  const int64_t tile = int64_t{plan.block} * plan.vec * plan.items;
  SizeExpr blocks = SizeExpr::CeilDiv(plan.space.numel.ToExpr(), SizeExpr::Const(tile));
  k.grid.x = plan.grid > 0 ? SizeExpr::Min(SizeExpr::Const(plan.grid), blocks) : blocks;
  k.block.x = SizeExpr::Const(plan.block);
  k.preconditions = std::move(plan.preconditions);
  k.variant = variant;
  for (int32_t id : plan.space.compute) k.ops.push_back(static_cast<uint32_t>(id));
  k.partition_reason = group.reason;
  return k;
}

namespace {

// Vector widths usable without a runtime divisibility precondition, widest
// first.
std::vector<int> SafeVecs(const Chain& chain, const KernelGroup& group) {
  std::vector<int> out;
  for (int v : {8, 4, 2, 1}) {
    Variant probe{Family::kPointwise, {{"vec", v}, {"items", 1}, {"block", 256}, {"grid", 0}}};
    auto plan = MakePlan(chain, group, probe, Numerics::kFast);
    if (plan.ok() && plan->preconditions.end() ==
                         std::find_if(plan->preconditions.begin(), plan->preconditions.end(),
                                      [](const Precondition& c) {
                                        return c.kind == Precondition::Kind::kDivisible;
                                      })) {
      out.push_back(v);
    }
  }
  return out;
}

Variant Make(int vec, int items, int block, int64_t grid) {
  return Variant{Family::kPointwise,
                 {{"vec", vec}, {"items", items}, {"block", block}, {"grid", grid}}};
}

}  // namespace

namespace {
int SpecialOps(const Chain& chain, const KernelGroup& group) {
  int n = 0;
  for (int32_t id : group.nodes) {
    switch (chain.nodes[id].kind) {
      case OpKind::kExp: case OpKind::kExp2: case OpKind::kLog: case OpKind::kLog2:
      case OpKind::kSin: case OpKind::kCos: case OpKind::kTanh: case OpKind::kSigmoid:
      case OpKind::kErf: case OpKind::kGeluErf: case OpKind::kGeluTanh: case OpKind::kSilu:
      case OpKind::kSoftplus: case OpKind::kPow:
        ++n;
        break;
      default:
        break;
    }
  }
  return n;
}
}  // namespace

Variant PointwiseHeuristic(const Chain& chain, const KernelGroup& group) {
  std::vector<int> vecs = SafeVecs(chain, group);
  const int vec = vecs.empty() ? 1 : vecs.front();
  auto space = BuildIterSpace(chain, group);
  // ~32 bytes per thread per input of the narrowest dtype read.
  int narrow = 4;
  int64_t numel = -1;
  if (space.ok()) {
    for (const Operand& o : space->inputs) {
      if (!o.uniform) narrow = std::min(narrow, DTypeBytes(o.dtype));
    }
    if (space->numel.is_static()) numel = space->numel.coef;
  }
  // H200, 128M elements: f32 relu(a*b+c) peaks at 32 bytes per thread per
  // input (4367 GB/s), bf16 bias+gelu at 64 (3910 vs 3758 GB/s at 32).
  const int target = narrow >= 4 ? 32 : 64;
  int items = std::clamp(target / (vec * narrow), 1, 4);
  // Chains heavy in special functions hide latency with their own math: more
  // unrolling buys little speed and costs NVRTC time (the 10-op bf16 chain:
  // 32 elements a thread compiled in 1.4 s on the CI machine).
  if (SpecialOps(chain, group) >= 3) items = std::clamp(8 / vec, 1, 4);
  // Small tensors: keep at least two waves of blocks on a 132-SM device.
  if (numel >= 0 && numel / (int64_t{256} * vec * items) < 2 * 132) items = 1;
  return Make(vec, items, 256, 0);
}

std::vector<Variant> PointwiseSpace(const Chain& chain, const KernelGroup& group) {
  std::vector<int> vecs = SafeVecs(chain, group);
  if (vecs.empty()) return {};
  std::vector<int> wide(vecs.begin(), vecs.begin() + std::min<size_t>(2, vecs.size()));
  std::set<Variant> seen;
  std::vector<Variant> out;
  auto add = [&](Variant v) {
    if (seen.insert(v).second && CanGenerate(chain, group, v).ok()) out.push_back(std::move(v));
  };
  add(PointwiseHeuristic(chain, group));
  for (int vec : wide) {
    for (int items : {1, 2, 4}) {
      for (int block : {128, 256, 512, 1024}) add(Make(vec, items, block, 0));
    }
  }
  for (int items : {1, 4}) add(Make(1, items, 256, 0));
  for (int items : {1, 2}) {
    for (int block : {256, 512}) {
      for (int64_t grid : {132 * 4, 132 * 8}) add(Make(vecs.front(), items, block, grid));
    }
  }
  return out;
}

}  // namespace kfuse
