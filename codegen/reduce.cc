#include "codegen/reduce.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/reduce_plan.h"
#include "core/dtype.h"
#include "core/status.h"

namespace kfuse {
namespace {

absl::Status BadParam(const Variant& v, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("variant ", v.ToString(), ": ", what));
}

bool IsPow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// A dim's size, or its symbol's hint (4096 without one).
int64_t Extent(const Chain& c, const Dim& d) {
  if (d.is_static()) return d.size;
  const int64_t hint = c.symbols[d.symbol].hint;
  return hint > 0 ? hint : 4096;
}

// Blocks along the reduced dim at most: their partials take slices x outputs
// of workspace.
constexpr int64_t kMaxSlices = 1024;

}  // namespace

absl::Status CheckOuterReduction(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  const TensorType& in = c.nodes[n.args[0]].type;
  auto no = [&](const char* why) {
    return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", why));
  };
  if (!IsReduction(n.kind)) return no("is not a reduction");
  if (in.rank() == 0 || n.axes.empty()) return no("a reduction of a scalar is not generated yet");
  if (std::find(n.axes.begin(), n.axes.end(), in.rank() - 1) != n.axes.end()) {
    return no(n.axes.size() == 1
                  ? "a reduction along the innermost axis belongs to the row family"
                  : "a reduction over the innermost axis and outer axes together is not "
                    "generated yet");
  }
  if (in.dtype == DType::kBool && n.kind != OpKind::kReduceSum) {
    return no("min/max of bool values are not generated yet");
  }
  return absl::OkStatus();
}

namespace reduce_internal {
namespace {

// Element strides of a buffer of `shape` (its own `own` strides) over the
// iteration space `space` (right-aligned; broadcast and unit dims get 0).
std::vector<Mono> StridesOver(const std::vector<Dim>& shape, const std::vector<Mono>& own,
                              const std::vector<Dim>& space) {
  KFUSE_CHECK(shape.size() <= space.size());  // Operands broadcast to their results.
  const size_t r = space.size(), off = r - shape.size();
  std::vector<Mono> st(r, Mono{0, {}});
  for (size_t i = off; i < r; ++i) {
    if (space[i] == Dim::Static(1) || shape[i - off] != space[i]) continue;
    st[i] = own[i - off];
  }
  return st;
}

std::vector<Mono> DenseStrides(const std::vector<Dim>& shape) {
  std::vector<Mono> st(shape.size());
  Mono acc{1, {}};
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * Mono::Of(shape[i]);
  }
  return st;
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const Chain& c, const KernelGroup& group, const Variant& variant,
                              Numerics numerics) {
  if (group.family != Family::kReduction) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel group is ", std::string(FamilyName(group.family)), ", not reduction"));
  }
  if (variant.family != Family::kReduction) return BadParam(variant, "family must be reduction");
  for (const auto& [name, value] : variant.params) {
    if (name != "block" && name != "split" && name != "slices" && name != "vec") {
      return BadParam(variant, absl::StrCat("unknown param \"", name, "\""));
    }
  }
  if (!variant.params.count("block")) return BadParam(variant, "missing block");
  const int64_t block = variant.Get("block");
  if (block != 128 && block != 256 && block != 512) {
    return BadParam(variant, "block must be 128, 256 or 512");
  }
  auto param = [&](const char* name) {
    return variant.params.count(name) ? variant.Get(name) : int64_t{1};
  };
  const int64_t split = param("split"), slices = param("slices"), vec = param("vec");
  if (!IsPow2(split) || split > block / 32) {
    return BadParam(variant, "split must be a power of two, at most block / 32");
  }
  if (!IsPow2(slices) || slices > kMaxSlices) {
    return BadParam(variant, absl::StrCat("slices must be a power of two, at most ", kMaxSlices));
  }
  if (vec != 1 && vec != 2 && vec != 4 && vec != 8) {
    return BadParam(variant, "vec must be 1, 2, 4 or 8");
  }
  const int32_t num_nodes = static_cast<int32_t>(c.nodes.size());
  Plan p;
  p.numerics = numerics;
  p.block = static_cast<int>(block);
  p.split = static_cast<int>(split);
  p.slices = static_cast<int>(slices);
  // The fp64 yardstick takes an output a thread: a vector of double
  // accumulators, compensations and exps spills.
  p.vec = numerics == Numerics::kReference64 ? 1 : static_cast<int>(vec);
  std::set<int32_t> members;
  for (int32_t id : group.nodes) {
    if (id < 0 || id >= num_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("kernel group refers to no node ", id));
    }
    members.insert(id);
    const OpKind k = c.nodes[id].kind;
    if (IsReduction(k)) {
      if (p.reduction >= 0) {
        return absl::InvalidArgumentError("a reduction kernel computes one reduction");
      }
      p.reduction = id;
    } else if (!IsElementwise(k)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", id, ": a reduction kernel computes its reduction and element-wise nodes"));
    }
  }
  if (p.reduction < 0) return absl::InvalidArgumentError("a reduction kernel needs a reduction");
  if (group.results != std::vector<int32_t>{p.reduction}) {
    return absl::InvalidArgumentError("a reduction kernel's one result is its reduction");
  }
  for (int32_t id : group.intermediates) {
    if (id != p.reduction) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", id, ": a reduction kernel writes no other intermediate"));
    }
    p.writes_intermediate = true;
  }
  KFUSE_RETURN_IF_ERROR(CheckOuterReduction(c, p.reduction));
  const Node& red = c.nodes[p.reduction];
  p.shape = c.nodes[red.args[0]].type.shape;
  p.reduced.assign(p.shape.size(), false);
  for (int64_t a : red.axes) p.reduced[a] = true;

  // The operand's closure: group members computed here, constants inline,
  // everything else read per element.
  std::set<int32_t> compute, inputs, intermediates;
  std::vector<int32_t> stack = {red.args[0]};
  std::set<int32_t> seen;
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    if (!seen.insert(id).second) continue;
    const Node& n = c.nodes[id];
    if (n.kind == OpKind::kInput) {
      inputs.insert(id);
    } else if (n.kind == OpKind::kConstant) {
      compute.insert(id);
    } else if (members.count(id)) {
      compute.insert(id);
      for (int32_t a : n.args) stack.push_back(a);
    } else {
      intermediates.insert(id);
    }
  }
  p.compute.assign(compute.begin(), compute.end());
  std::vector<int32_t> by_index(inputs.begin(), inputs.end());
  std::sort(by_index.begin(), by_index.end(), [&](int32_t a, int32_t b) {
    return c.nodes[a].input_index < c.nodes[b].input_index;
  });
  for (int32_t id : by_index) {
    const Node& n = c.nodes[id];
    std::vector<Mono> own;
    if (n.strides.empty()) {
      own = DenseStrides(n.type.shape);
    } else {
      for (int64_t s : n.strides) own.push_back(Mono{s, {}});
    }
    p.leaves.push_back(Leaf{id,
                            BufferRef{BufferRef::Kind::kInput,
                                      static_cast<uint32_t>(n.input_index)},
                            n.type.dtype, StridesOver(n.type.shape, own, p.shape)});
  }
  for (int32_t id : intermediates) {  // Earlier kernels' results, in their buffers' type.
    const TensorType& t = c.nodes[id].type;
    p.leaves.push_back(Leaf{id,
                            BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)},
                            IntermediateDType(c, id),
                            StridesOver(t.shape, DenseStrides(t.shape), p.shape)});
  }
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    if (c.outputs[j] == p.reduction) p.outputs.push_back(static_cast<uint32_t>(j));
  }
  if (p.outputs.empty() && !p.writes_intermediate) {
    return absl::InvalidArgumentError(
        "the reduction is neither a chain output nor read by a later kernel");
  }
  std::set<int32_t> syms;
  for (const Dim& d : p.shape) {
    if (!d.is_static()) syms.insert(d.symbol);
  }
  p.symbols.assign(syms.begin(), syms.end());

  // The longest reduced dim (by its hint when symbolic), the outermost of
  // equals.
  int64_t longest = 0;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (!p.reduced[d] || p.shape[d] == Dim::Static(1)) continue;
    const int64_t e = Extent(c, p.shape[d]);
    if (e > longest) {
      longest = e;
      p.split_dim = static_cast<int>(d);
    }
  }
  if (p.Staged() && p.split_dim < 0) {
    return BadParam(variant, "split and slices need a reduced dim longer than 1");
  }
  if (p.vec > 1) {
    const Dim& inner = p.shape.back();
    if (!inner.is_static() || inner.size % p.vec != 0) {
      return BadParam(variant, absl::StrCat("vec ", p.vec,
                                            " needs a static innermost dim that is a multiple "
                                            "of it"));
    }
    for (Leaf& l : p.leaves) {
      const Mono& st = l.strides.back();
      if (st.is_zero()) continue;
      if (st != Mono{1, {}}) {
        return BadParam(variant, absl::StrCat("vec ", p.vec, ": ", OpLabel(c, l.node),
                                              " is strided along the innermost dim"));
      }
      // Vectors start at multiples of vec elements when every other stride
      // is a multiple of vec; else the leaf is read an element at a time.
      bool starts = true;
      for (size_t d = 0; d + 1 < l.strides.size(); ++d) {
        starts = starts && l.strides[d].coef % p.vec == 0;
      }
      // (vec is 1 in the fp64 yardstick, whose intermediates are double.)
      // An intermediate kept in f32 for a 16-bit result (IntermediateDType)
      // is read in vectors of up to 32 bytes, as wide as the 16-bit
      // operands': one vector load the compiler hoists out of the loop where
      // eight float loads stayed in it (its buffer is the launcher's own
      // allocation, aligned far beyond).
      const int64_t bytes = int64_t{p.vec} * DTypeBytes(l.dtype);
      const bool wide = l.buffer.kind == BufferRef::Kind::kIntermediate &&
                        l.dtype != c.nodes[l.node].type.dtype;
      l.vector = starts && bytes <= (wide ? 32 : 16);
      l.window = !starts && !wide && (bytes == 4 || bytes == 8 || bytes == 16);
      if (!l.vector) continue;
      const char* kind =
          l.buffer.kind == BufferRef::Kind::kInput ? "input" : "intermediate";
      Precondition a;
      a.kind = Precondition::Kind::kAligned;
      a.buffer = l.buffer;
      a.value = bytes;
      a.description =
          absl::StrCat(kind, " ", l.buffer.index, " is ", bytes, "-byte aligned (vector loads)");
      p.preconditions.push_back(std::move(a));
    }
  }
  return p;
}

}  // namespace reduce_internal

using reduce_internal::MakePlan;
using reduce_internal::Plan;

namespace {

// The count of output elements: the product of the kept dims.
SizeExpr Outputs(const std::vector<Dim>& shape, const std::vector<bool>& reduced) {
  SizeExpr n = SizeExpr::Const(1);
  bool first = true;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d] || shape[d] == Dim::Static(1)) continue;
    const Dim& dim = shape[d];
    SizeExpr e = dim.is_static() ? SizeExpr::Const(dim.size)
                                 : SizeExpr::Symbol(static_cast<uint32_t>(dim.symbol));
    n = first ? e : SizeExpr::Mul(n, e);
    first = false;
  }
  return n;
}

// Blocks along the outputs: grid.x.
SizeExpr Columns(const Plan& plan, const SizeExpr& outputs) {
  return SizeExpr::CeilDiv(outputs, SizeExpr::Const(int64_t{plan.Lanes()} * plan.vec));
}

}  // namespace

absl::Status CanGenerateReduce(const Chain& chain, const KernelGroup& group,
                               const Variant& variant) {
  return MakePlan(chain, group, variant, Numerics::kFast).status();
}

absl::StatusOr<KernelSpec> EmitReduce(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant, Numerics numerics) {
  KFUSE_ASSIGN_OR_RETURN(Plan plan, MakePlan(chain, group, variant, numerics));
  KFUSE_ASSIGN_OR_RETURN(reduce_internal::Source src, reduce_internal::WriteSource(chain, plan));
  KernelSpec k;
  k.entry = std::move(src.entry);
  k.source = std::move(src.text);
  // Parameter order: chain inputs (all of them), intermediates read, chain
  // outputs written, the intermediate written, symbols.
  for (int i = 0; i < chain.num_inputs(); ++i) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(i)}));
  }
  for (const reduce_internal::Leaf& l : plan.leaves) {
    if (l.buffer.kind == BufferRef::Kind::kIntermediate) {
      k.params.push_back(KernelParam::Buffer(l.buffer));
    }
  }
  for (uint32_t j : plan.outputs) {
    k.params.push_back(KernelParam::Buffer(BufferRef{BufferRef::Kind::kOutput, j}));
  }
  if (plan.writes_intermediate) {
    k.params.push_back(KernelParam::Buffer(BufferRef{
        BufferRef::Kind::kIntermediate, static_cast<uint32_t>(plan.reduction)}));
  }
  const SizeExpr outputs = Outputs(plan.shape, plan.reduced);
  if (plan.slices > 1) {
    // Each slice's partials, then a counter per block column (zeroed): the
    // last block of a column to finish adds the slices in order.
    const SizeExpr columns = Columns(plan, outputs);
    const std::string ct =
        ComputeType(chain.nodes[plan.reduction].type.dtype, plan.numerics);
    const int64_t acc = ct == "double" || ct == "long long" ? 8 : 4;
    KernelParam ws;
    ws.kind = KernelParam::Kind::kWorkspace;
    ws.workspace_bytes = SizeExpr::Mul(outputs, SizeExpr::Const(plan.slices * acc));
    k.params.push_back(ws);
    KernelParam counters;
    counters.kind = KernelParam::Kind::kWorkspace;
    counters.workspace_bytes = SizeExpr::Mul(columns, SizeExpr::Const(4));
    counters.workspace_zeroed = true;
    k.params.push_back(counters);
  }
  for (int32_t sym : plan.symbols) {
    k.params.push_back(
        KernelParam::Scalar(SizeExpr::Symbol(static_cast<uint32_t>(sym)), DType::kI64));
  }
  k.grid.x = Columns(plan, outputs);
  k.grid.y = SizeExpr::Const(plan.slices);
  k.block.x = SizeExpr::Const(plan.block);
  k.preconditions = plan.preconditions;
  k.variant = variant;
  for (int32_t id : plan.compute) {
    if (chain.nodes[id].kind != OpKind::kConstant) k.ops.push_back(static_cast<uint32_t>(id));
  }
  k.ops.push_back(static_cast<uint32_t>(plan.reduction));
  std::sort(k.ops.begin(), k.ops.end());
  k.partition_reason = group.reason;
  return k;
}

namespace {

// Threads the heuristic wants in flight: a quarter of the H200's resident
// 132 x 2048. With four 16-byte loads in flight each, that is 4 MB, what
// HBM's latency asks for; more slices only cost more partials (H200, run122:
// the bf16 column sum of [32768, 4096] took 78.6 us at 32 slices, 91.4 at
// 128, 119 at 512).
constexpr int64_t kWantThreads = 132 * 2048 / 4;
// Reduced indices a thread adds at least, where the split leaves a choice.
constexpr int64_t kMinPerThread = 32;

// `base` with params split, slices and vec (a param of 1 left out).
Variant With(Variant v, int64_t split, int64_t slices, int64_t vec) {
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"split", split}, {"slices", slices}, {"vec", vec}}) {
    if (value == 1) {
      v.params.erase(name);
    } else {
      v.params[name] = value;
    }
  }
  return v;
}

}  // namespace

Variant ReduceHeuristic(const Chain& chain, const KernelGroup& group) {
  Variant v{Family::kReduction, {{"block", 256}}};
  absl::StatusOr<Plan> plan = MakePlan(chain, group, v, Numerics::kFast);
  if (!plan.ok()) return v;
  // The widest vectors some operand is read in (aligned, or through a
  // window).
  int64_t vec = 1;
  for (int64_t w : {8, 4, 2}) {
    absl::StatusOr<Plan> p = MakePlan(chain, group, With(v, 1, 1, w), Numerics::kFast);
    if (p.ok() && std::any_of(p->leaves.begin(), p->leaves.end(), [](const reduce_internal::Leaf& l) {
          return l.vector || l.window;
        })) {
      vec = w;
      break;
    }
  }
  if (plan->split_dim < 0) return With(v, 1, 1, vec);
  // Counts from sizes and hints, capped (a hint is the client's guess, and
  // only how it compares with a few thousand threads matters here).
  constexpr int64_t kCap = int64_t{1} << 40;
  int64_t outputs = 1, reduced = 1;
  for (size_t d = 0; d < plan->shape.size(); ++d) {
    int64_t& n = plan->reduced[d] ? reduced : outputs;
    const int64_t e = std::min(kCap, Extent(chain, plan->shape[d]));
    n = e > 0 && n > kCap / e ? kCap : n * e;
  }
  const int64_t lanes = (outputs + vec - 1) / vec;
  if (lanes >= kWantThreads) return With(v, 1, 1, vec);
  // Too few outputs for kWantThreads: split_dim is split over a block's
  // threads (each row of them a warp or more of adjacent outputs), then
  // over blocks, while each thread keeps kMinPerThread indices to add.
  const int64_t extent = Extent(chain, plan->shape[plan->split_dim]);
  auto fits = [&](int64_t ways) { return ways <= extent && reduced / ways >= kMinPerThread; };
  int64_t split = 8;
  while (split > 1 && !fits(split)) split /= 2;
  const int64_t columns = (lanes + 256 / split - 1) / (256 / split);
  int64_t slices = 1;
  while (slices < kMaxSlices && columns * slices * 256 < kWantThreads &&
         fits(split * slices * 2)) {
    slices *= 2;
  }
  return With(v, split, slices, vec);
}

std::vector<Variant> ReduceSpace(const Chain& chain, const KernelGroup& group) {
  const Variant h = ReduceHeuristic(chain, group);
  auto get = [&](const char* name) { return h.params.count(name) ? h.Get(name) : int64_t{1}; };
  const int64_t slices = get("slices"), vec = get("vec");
  std::vector<Variant> out;
  auto add = [&](const Variant& v) {
    if (std::find(out.begin(), out.end(), v) == out.end() &&
        CanGenerateReduce(chain, group, v).ok()) {
      out.push_back(v);
    }
  };
  add(h);
  for (int64_t split : {get("split"), int64_t{8}, int64_t{4}, int64_t{1}}) {
    for (int64_t s : {slices, slices * 4, std::max<int64_t>(1, slices / 4)}) {
      add(With(h, split, s, vec));
    }
  }
  add(With(h, get("split"), slices, 1));
  add(With(h, 1, 1, vec));
  add(With(h, 1, 1, 1));  // A thread an output, reduce/1's schedule.
  return out;
}

}  // namespace kfuse
