#include "codegen/row.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/row_plan.h"
#include "core/status.h"

namespace kfuse {
namespace row_internal {

// Sliced rows (Plan::slices): at most this many blocks a row, and at most
// about kMaxSliceSlots blocks a launch (fewer slices where rows are many).
constexpr int64_t kMaxSlices = 1024;
constexpr int64_t kMaxSliceSlots = int64_t{1} << 16;

namespace {

constexpr int kMaxResidentElements = 128;
// Dynamic shared memory a block may take on sm_90 (227 KiB), less what the
// team reductions use.
constexpr int64_t kMaxStageBytes = 227 * 1024 - 1024;
// dyn=1's row counter is 32 bits; each of at most 2^20 blocks takes up to
// stages + 1 <= 5 rows past the last.
constexpr int64_t kDynRowsMax = (int64_t{1} << 32) - 1 - 5 * (int64_t{1} << 20);

bool Contains(std::initializer_list<int64_t> set, int64_t v) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

absl::Status BadParam(const Variant& v, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("variant ", v.ToString(), ": ", what));
}

SizeExpr DimExpr(const Dim& d) {
  return d.is_static() ? SizeExpr::Const(d.size)
                       : SizeExpr::Symbol(static_cast<uint32_t>(d.symbol));
}

// Whether input `id` (a per-element input) holds different values in
// different rows, rather than one row's worth broadcast to all.
bool VariesByRow(const Chain& c, const RowStructure& r, int32_t id) {
  const Node& n = c.nodes[id];
  const int frame = static_cast<int>(r.row_shape.size()) - (r.reduced_frame[id] ? 1 : 0);
  const int off = frame - n.type.rank();
  for (int d = 0; d < n.type.rank(); ++d) {
    if (off + d < static_cast<int>(r.row_shape.size()) - 1 && n.type.shape[d] != Dim::Static(1)) {
      return true;
    }
  }
  return false;
}

// Whether vectors of `vec` read input `id` where they lie: each of its
// rows starts at the dense rows' phase (modulo the vector, or where rows
// are peeled modulo `align`, their phase varying from row to row, which
// only an input laid out as the rows are keeps).
bool InPhase(const Chain& c, const RowStructure& r, int32_t id, int64_t vec, bool peel,
             int64_t align) {
  const Node& n = c.nodes[id];
  if (peel && (r.reduced_frame[id] || n.type.shape != r.row_shape)) return false;
  return kfuse::StridedRowsMisfit(n, r.row_shape, vec, peel, align).empty();
}

// Why vectors of `vec` cannot read input `id` at all, or empty where they
// can: in phase, or through windows (kf_ldw), which need consecutive
// elements and vectors of at least 4 bytes.
std::string Unreadable(const Chain& c, const RowStructure& r, int32_t id, int64_t vec, bool peel,
                       int64_t align) {
  if (vec == 1 || InPhase(c, r, id, vec, peel, align)) return "";
  const Node& n = c.nodes[id];
  if (!n.strides.empty() && n.strides.back() != 1 && n.type.shape.back() != Dim::Static(1)) {
    return kfuse::StridedRowsMisfit(n, r.row_shape, vec, peel, align);
  }
  if (vec * DTypeBytes(StorageDType(n)) < 4) {
    return absl::StrCat("vec ", vec, " reads input ", n.input_index,
                        " off the dense rows' phase in vectors of fewer than 4 bytes");
  }
  return "";
}

// The first of Unreadable's answers for the per-element inputs of `c`.
std::string Unreadable(const Chain& c, const RowStructure& r, int64_t vec, bool peel,
                       int64_t align) {
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (c.nodes[id].kind != OpKind::kInput || r.cls[id] != RowStructure::Class::kElement) continue;
    std::string why = Unreadable(c, r, id, vec, peel, align);
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace

int WidestElementBytes(const Chain& c, const RowStructure& r) {
  int w = 1;
  for (size_t id = 0; id < c.nodes.size(); ++id) {
    // An earlier kernel's 16-bit result kept in f32 counts as its 16-bit
    // value (a broadcast row: its vectors may take two 16-byte loads).
    if (c.nodes[id].kind == OpKind::kInput && r.cls[id] == RowStructure::Class::kElement) {
      w = std::max(w, DTypeBytes(c.nodes[id].type.dtype));
    }
  }
  for (int32_t o : c.outputs) {
    if (r.cls[o] == RowStructure::Class::kElement) w = std::max(w, DTypeBytes(c.nodes[o].type.dtype));
  }
  return w;
}

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics) {
  if (group.family != Family::kRowReduction) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel group is ", std::string(FamilyName(group.family)), ", not row_reduction"));
  }
  std::vector<int32_t> all;
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    OpKind k = chain.nodes[id].kind;
    if (k != OpKind::kInput && k != OpKind::kConstant) all.push_back(id);
  }
  if (group.nodes != all) {
    return absl::UnimplementedError("a row kernel computes the whole chain");
  }
  if (variant.family != Family::kRowReduction) {
    return BadParam(variant, "family must be row_reduction");
  }
  for (const auto& [name, value] : variant.params) {
    if (name != "vec" && name != "threads" && name != "rows" && name != "resident" &&
        name != "split" && name != "stages" && name != "grid" && name != "policy" &&
        name != "dyn" && name != "slices") {
      return BadParam(variant, absl::StrCat("unknown param \"", name, "\""));
    }
  }
  for (const char* name : {"vec", "threads", "rows", "resident"}) {
    if (!variant.params.count(name)) return BadParam(variant, absl::StrCat("missing ", name));
  }
  const int64_t vec = variant.Get("vec"), threads = variant.Get("threads"),
                rows = variant.Get("rows"), resident = variant.Get("resident"),
                split = variant.Get("split", 1);
  if (!Contains({1, 2, 4, 8}, vec)) return BadParam(variant, "vec must be 1, 2, 4 or 8");
  if (!Contains({32, 64, 128, 256, 512, 1024}, threads)) {
    return BadParam(variant, "threads must be a power of two from 32 to 1024");
  }
  if (!Contains({1, 2, 4, 8, 16}, rows)) return BadParam(variant, "rows must be 1, 2, 4, 8 or 16");
  if (threads * rows > 1024) return BadParam(variant, "threads * rows exceeds 1024");
  if (resident < 0 || resident > 3) {
    return BadParam(variant, "resident must be 0 (re-read), 1 (registers), 2 (shared memory) or "
                             "3 (bulk copies to shared memory)");
  }
  const int64_t stages = variant.Get("stages", 0), grid = variant.Get("grid", 0);
  if (resident == 3) {
    if (!Contains({1, 2, 3, 4}, stages)) return BadParam(variant, "stages must be 1, 2, 3 or 4");
    if (grid < 1 || grid > (int64_t{1} << 20)) {
      return BadParam(variant, "grid must be from 1 to 2^20 blocks");
    }
    if (rows != 1) return BadParam(variant, "resident=3 needs rows=1");
    // A peeled row's columns around its vectors are one a thread.
    if (threads < 128) return BadParam(variant, "resident=3 needs at least 128 threads");
  } else if (variant.params.count("stages") || variant.params.count("grid") ||
             variant.params.count("dyn")) {
    return BadParam(variant, "stages, grid and dyn are resident=3's");
  }
  const int64_t dyn = variant.Get("dyn", 0);
  if (dyn != 0 && dyn != 1) return BadParam(variant, "dyn must be 0 or 1");
  if (!Contains({1, 2, 4, 8}, split)) return BadParam(variant, "split must be 1, 2, 4 or 8");
  if (split > 1 && (resident != 1 || rows != 1)) {
    return BadParam(variant, "split rows need resident=1 and rows=1");
  }
  const int64_t slices = variant.Get("slices", 1);
  if (slices < 1 || slices > kMaxSlices || (slices & (slices - 1)) != 0) {
    return BadParam(variant, absl::StrCat("slices must be a power of two, at most ", kMaxSlices));
  }
  if (slices > 1 && (resident != 0 || rows != 1)) {
    return BadParam(variant, "sliced rows need resident=0 and rows=1");
  }
  const int64_t policy = variant.Get("policy", 0);
  if (policy != 0 && policy != 1) return BadParam(variant, "policy must be 0 or 1");
  if (policy == 1 && (resident != 1 || split > 1)) {
    return BadParam(variant, "policy=1 is for register-resident rows (resident=1), not split");
  }

  Plan p;
  KFUSE_ASSIGN_OR_RETURN(p.rows, AnalyzeRows(chain));
  const RowStructure& r = p.rows;
  p.numerics = numerics;
  const int widest = WidestElementBytes(chain, r);
  if (vec * widest > 16) {
    return BadParam(variant, absl::StrCat("vec ", vec, " of ", widest,
                                          "-byte elements exceeds 16-byte accesses"));
  }
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    if (chain.nodes[id].kind == OpKind::kInput && r.cls[id] == RowStructure::Class::kElement) {
      p.elem_inputs.push_back(id);
      if (VariesByRow(chain, r, id)) p.held_inputs.push_back(id);
    }
  }
  std::set<int32_t> syms;
  for (const Dim& d : r.row_shape) {
    if (!d.is_static()) syms.insert(d.symbol);
  }
  p.symbols.assign(syms.begin(), syms.end());
  // The fp64 yardstick is the plainest schedule of the variant: scalar
  // accesses, a loop over the row.
  const bool reference = numerics == Numerics::kReference64;
  if (r.width.is_static() && r.width.size % vec != 0) p.peel = !reference && vec > 1;
  p.vec = reference ? 1 : static_cast<int>(vec);
  p.threads = static_cast<int>(threads);
  p.rows_per_block = static_cast<int>(rows);
  p.resident_param = static_cast<int>(resident);
  if (resident == 2) {
    // The row's per-row inputs staged in shared memory by the first pass
    // that reads them; later passes read them there, not from L2 or HBM.
    if (!r.width.is_static()) return BadParam(variant, "resident=2 needs a static row width");
    p.stage_stride = (r.width.size + vec + 15) / 16 * 16;
    int64_t bytes = 0;
    for (int32_t id : p.held_inputs) {
      bytes += rows * p.stage_stride * DTypeBytes(StorageDType(chain.nodes[id]));
    }
    if (bytes > kMaxStageBytes) {
      return BadParam(variant, absl::StrCat("resident=2 needs ", bytes,
                                            " bytes of shared memory a block; at most ",
                                            kMaxStageBytes));
    }
    if (!reference) p.stage_bytes = static_cast<int>(bytes);
  }
  if (resident == 3) {
    if (!r.width.is_static()) return BadParam(variant, "resident=3 needs a static row width");
    if (p.held_inputs.empty()) return BadParam(variant, "resident=3 needs an input that varies by row");
    // Bulk copies move 16-byte units: each staged input's vectors are 16 bytes.
    const int bytes = DTypeBytes(StorageDType(chain.nodes[p.held_inputs[0]]));
    for (int32_t id : p.held_inputs) {
      if (vec * DTypeBytes(StorageDType(chain.nodes[id])) != 16) {
        return BadParam(variant, absl::StrCat("resident=3 needs 16-byte vectors of every staged "
                                              "input; input ", chain.nodes[id].input_index,
                                              " has ", vec, " x ",
                                              DTypeBytes(StorageDType(chain.nodes[id])), " bytes"));
      }
    }
    const int64_t line = 128 / bytes;
    if (r.width.size < 2 * line) {
      return BadParam(variant, absl::StrCat("resident=3 needs rows of at least ", 2 * line,
                                            " elements"));
    }
    // A row of an input off the dense rows' phase is copied from the
    // 16-byte unit holding its first element: up to 16 bytes more.
    bool shifted = false;
    for (int32_t id : p.held_inputs) {
      shifted = shifted || !InPhase(chain, r, id, vec, p.peel, p.peel ? line : vec);
    }
    p.stage_stride = (r.width.size + (shifted ? 16 / bytes : 0) + line - 1) / line * line;
    const int64_t total = stages * static_cast<int64_t>(p.held_inputs.size()) * p.stage_stride * bytes;
    if (total > kMaxStageBytes) {
      return BadParam(variant, absl::StrCat("resident=3 needs ", total,
                                            " bytes of shared memory a block; at most ",
                                            kMaxStageBytes));
    }
    if (!reference) {
      p.bulk = true;
      p.stage_bytes = static_cast<int>(total);
      p.stages = static_cast<int>(stages);
      p.grid = grid;
      p.dyn = dyn == 1;
      if (p.peel) p.align = static_cast<int>(line);
    }
  }
  if (p.peel && p.align < p.vec) p.align = p.vec;
  for (int32_t id : p.elem_inputs) {
    if (p.vec == 1 || InPhase(chain, r, id, p.vec, p.peel, p.align)) continue;
    if (std::string why = Unreadable(chain, r, id, p.vec, p.peel, p.align); !why.empty()) {
      return BadParam(variant, why);
    }
    p.window_inputs.push_back(id);
  }
  if (slices > 1 && !reference) {
    if (p.peel) return BadParam(variant, "sliced rows need vec to divide the row width");
    p.sliced_reductions = SlicedReductions(chain, p);
    if (p.sliced_reductions == 0) {
      return BadParam(variant, "sliced rows need one pass over the row and per-row outputs only");
    }
    p.slices = static_cast<int>(slices);
  }
  if (resident == 1) {
    if (!r.width.is_static()) return BadParam(variant, "resident needs a static row width");
    // A peeled row holds its aligned vectors and one more element a thread
    // (the few columns before the first aligned vector and after the last).
    const int64_t vectors = r.width.size / vec;
    const int64_t share = (vectors + split - 1) / split;  // A block's vectors.
    const int64_t items = (share + threads - 1) / threads;
    // At least one array of slots: a row no input of which varies by row
    // (one row, or inputs broadcast over rows) holds no input, but keeps
    // what it computes in arrays of that size (h<id>[slots]), which this
    // budget does not count otherwise.
    const int64_t held = (items * vec + (p.peel ? 1 : 0)) *
                         std::max<int64_t>(1, static_cast<int64_t>(p.held_inputs.size()));
    // Fewer registers per thread in bigger blocks (NVRTC spilled 72 held
    // elements at 256 threads).
    const int64_t budget = std::min<int64_t>(kMaxResidentElements, 16384 / (threads * rows));
    if (held > budget) {
      return BadParam(variant, absl::StrCat("resident rows need ", held,
                                            " registers per thread; at most ", budget,
                                            " at ", threads * rows, " threads per block"));
    }
    p.resident = !reference;
    p.items = static_cast<int>(items);
    if (!reference) p.policy = static_cast<int>(policy);
    if (split > 1 && !reference) {
      p.split = static_cast<int>(split);
      p.split_vectors = share;
    }
  }
  if (p.vec > 1) {
    if (!r.width.is_static()) {
      Precondition c;
      c.kind = Precondition::Kind::kDivisible;
      c.expr = DimExpr(r.width);
      c.value = p.vec;
      c.description = absl::StrCat("the row width is a multiple of ", p.vec, " (vector access)");
      p.preconditions.push_back(std::move(c));
    }
    auto aligned = [&](BufferRef b, DType t, const char* kind) {
      Precondition c;
      c.kind = Precondition::Kind::kAligned;
      c.buffer = b;
      c.value = int64_t{p.vec} * DTypeBytes(t);
      c.description = absl::StrCat(kind, " ", b.index, " is ", c.value,
                                   "-byte aligned (vector access)");
      p.preconditions.push_back(std::move(c));
    };
    for (int32_t id : p.elem_inputs) {
      if (p.Windowed(id)) continue;  // A window's reads are aligned wherever the input lies.
      const Node& n = chain.nodes[id];
      aligned(BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(n.input_index)},
              StorageDType(n), "input");
    }
    for (size_t j = 0; j < chain.outputs.size(); ++j) {
      const int32_t o = chain.outputs[j];
      if (r.cls[o] != RowStructure::Class::kElement) continue;
      aligned(BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)},
              chain.nodes[o].type.dtype, "output");
    }
  }
  return p;
}

}  // namespace row_internal

std::string StridedRowsMisfit(const Node& n, const std::vector<Dim>& row_shape, int64_t vec, bool peel,
                              int64_t align) {
  if (vec == 1 || (n.strides.empty() && n.offset == 0)) return "";
  const int k = static_cast<int>(row_shape.size());
  const int64_t m = peel ? align : vec;
  if (n.offset % m != 0) {
    return absl::StrCat("vec ", vec, " reads input ", n.input_index, " misaligned: it starts ", n.offset,
                        " elements into its buffer, off the ", m, "-element phase of the vectors");
  }
  if (n.strides.empty()) return "";
  if (n.strides.back() != 1 && n.type.shape.back() != Dim::Static(1)) {
    return absl::StrCat("vec ", vec, " cannot read input ", n.input_index, "'s rows, whose elements are ",
                        n.strides.back(), " apart, as vectors");
  }
  const int off = k - n.type.rank();
  for (int d = 0; d + 1 < n.type.rank(); ++d) {
    if (n.type.shape[d] == Dim::Static(1)) continue;
    // The dense rows' stride along this dim where rows are peeled (their
    // phase varies from row to row); 0 otherwise (every row aligned).
    int64_t dense = 0;
    if (peel) {
      dense = row_shape.back().size;
      for (int e = off + d + 1; e < k - 1; ++e) {
        if (!row_shape[e].is_static()) {
          return absl::StrCat("vec ", vec, " of input ", n.input_index, "'s strided rows needs static row dims");
        }
        dense *= row_shape[e].size;
      }
    }
    if ((n.strides[d] - dense) % m != 0) {
      return absl::StrCat("vec ", vec, " reads input ", n.input_index, " misaligned: its stride ", n.strides[d],
                          " along dim ", d, " moves a row's start off the ", m, "-element phase ",
                          peel ? "of the dense rows" : "of the vectors");
    }
  }
  return "";
}

using row_internal::MakePlan;
using row_internal::Passes;
using row_internal::Plan;

absl::Status CanGenerateRow(const Chain& chain, const KernelGroup& group, const Variant& variant) {
  return MakePlan(chain, group, variant, Numerics::kFast).status();
}

int RowMinComputeCapability(const Variant& variant) {
  return variant.Get("split", 1) > 1 || variant.Get("resident", 0) == 3 ? 90 : 80;
}

absl::StatusOr<KernelSpec> EmitRow(const Chain& chain, const KernelGroup& group,
                                   const Variant& variant, Numerics numerics) {
  KFUSE_ASSIGN_OR_RETURN(Plan plan, MakePlan(chain, group, variant, numerics));
  KFUSE_ASSIGN_OR_RETURN(row_internal::Source src, row_internal::WriteSource(chain, plan));
  KernelSpec k;
  k.entry = std::move(src.entry);
  k.source = std::move(src.text);
  for (int i = 0; i < chain.num_inputs(); ++i) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(i)}));
  }
  for (size_t j = 0; j < chain.outputs.size(); ++j) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)}));
  }
  for (int32_t s : plan.symbols) {
    k.params.push_back(KernelParam::Scalar(SizeExpr::Symbol(static_cast<uint32_t>(s)), DType::kI64));
  }
  SizeExpr rows = SizeExpr::Const(1);
  for (size_t d = 0; d + 1 < plan.rows.row_shape.size(); ++d) {
    const Dim& dim = plan.rows.row_shape[d];
    rows = SizeExpr::Mul(rows, dim.is_static() ? SizeExpr::Const(dim.size)
                                               : SizeExpr::Symbol(static_cast<uint32_t>(dim.symbol)));
  }
  // Sliced rows: the variant's slices, fewer where the rows are many (at
  // most kMaxSliceSlots blocks' values a launch beside one a row), so the
  // workspace stays small whatever the row count.
  const SizeExpr slices = SizeExpr::Min(
      SizeExpr::Const(plan.slices),
      SizeExpr::CeilDiv(SizeExpr::Const(row_internal::kMaxSliceSlots), SizeExpr::Max(rows, SizeExpr::Const(1))));
  if (plan.slices > 1) {
    // Each block's value of each reduction (8-byte slots), and a counter a
    // row, zeroed before each launch: the row's last block combines them.
    KernelParam ws;
    ws.kind = KernelParam::Kind::kWorkspace;
    ws.workspace_bytes =
        SizeExpr::Mul(SizeExpr::Mul(rows, slices), SizeExpr::Const(int64_t{8} * plan.sliced_reductions));
    k.params.push_back(std::move(ws));
    KernelParam counters;
    counters.kind = KernelParam::Kind::kWorkspace;
    counters.workspace_bytes = SizeExpr::Mul(rows, SizeExpr::Const(4));
    counters.workspace_zeroed = true;
    k.params.push_back(std::move(counters));
  }
  if (plan.dyn) {  // The next row to hand out: a counter zeroed before each launch.
    KernelParam next;
    next.kind = KernelParam::Kind::kWorkspace;
    next.workspace_bytes = SizeExpr::Const(4);
    next.workspace_zeroed = true;
    k.params.push_back(std::move(next));
  }
  k.grid.x = SizeExpr::CeilDiv(rows, SizeExpr::Const(plan.rows_per_block));
  // Persistent blocks loop over the rows.
  if (plan.bulk) k.grid.x = SizeExpr::Min(rows, SizeExpr::Const(plan.grid));
  // A split row's blocks are one cluster, its size fixed in the source
  // (__cluster_dims__): a plain launch keeps it.
  if (plan.split > 1) k.grid.x = SizeExpr::Mul(k.grid.x, SizeExpr::Const(plan.split));
  if (plan.slices > 1) k.grid.y = slices;
  k.block.x = SizeExpr::Const(int64_t{plan.threads} * plan.rows_per_block);
  k.dynamic_smem_bytes = static_cast<uint32_t>(plan.stage_bytes);
  k.preconditions = std::move(plan.preconditions);
  if (plan.dyn) {
    // The counter is 32 bits (a 64-bit one spilled an f32 LayerNorm's
    // registers); blocks take up to stages + 1 rows each past the last.
    Precondition c;
    c.kind = Precondition::Kind::kAtMost;
    c.expr = rows;
    c.value = row_internal::kDynRowsMax;
    c.description = absl::StrCat("the row count is at most ", row_internal::kDynRowsMax,
                                 " (dyn: a 32-bit row counter)");
    k.preconditions.push_back(std::move(c));
  }
  k.variant = variant;
  for (int32_t id : group.nodes) k.ops.push_back(static_cast<uint32_t>(id));
  k.partition_reason = group.reason;
  return k;
}

namespace {

Variant Make(int vec, int threads, int rows, int resident) {
  return Variant{Family::kRowReduction,
                 {{"vec", vec}, {"threads", threads}, {"rows", rows}, {"resident", resident}}};
}

struct Shape {
  int64_t width = -1;  // -1: symbolic.
  int widest = 4;
  int elem_inputs = 1;
  std::vector<int> vecs;  // Legal without a runtime precondition, widest first.
  std::vector<int> peel_vecs;  // The row peeled (see Plan::peel); widest first.
};

Shape ShapeOf(const Chain& chain) {
  Shape s;
  auto r = AnalyzeRows(chain);
  if (!r.ok()) return s;
  if (r->width.is_static()) s.width = r->width.size;
  s.widest = row_internal::WidestElementBytes(chain, *r);
  s.elem_inputs = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(chain.nodes.size()); ++id) {
    if (chain.nodes[id].kind == OpKind::kInput && r->cls[id] == RowStructure::Class::kElement &&
        row_internal::VariesByRow(chain, *r, id)) {
      ++s.elem_inputs;
    }
  }
  s.elem_inputs = std::max(s.elem_inputs, 1);
  for (int v : {8, 4, 2, 1}) {
    if (v * s.widest <= 16 && (v == 1 || (s.width > 0 && s.width % v == 0)) &&
        row_internal::Unreadable(chain, *r, v, false, v).empty()) {
      s.vecs.push_back(v);
    }
  }
  for (int v : {8, 4, 2}) {  // Rows peeled to their first aligned vector.
    if (v * s.widest <= 16 && s.width > 0 && s.width % v != 0 &&
        row_internal::Unreadable(chain, *r, v, true, v).empty()) {
      s.peel_vecs.push_back(v);
    }
  }
  return s;
}

int Pow2Floor(int64_t x) {
  int p = 1;
  while (int64_t{p} * 2 <= x && p < (1 << 20)) p <<= 1;
  return p;
}

// Rows at least this wide also get variants split over a cluster of blocks.
constexpr int64_t kSplitWidth = 16384;
// Rows at least this wide also get bulk-staged variants (resident=3).
constexpr int64_t kBulkWidth = 2048;

// A register-resident row in the heuristic: at most this many elements a
// thread (over the inputs that differ by row). The H200 trials (run27)
// had 40-element rows (5120 wide, 128 threads) fastest.
constexpr int64_t kResidentHeuristic = 48;

// Bulk-staged rows (resident=3) of `threads` and `stages` buffers, with as
// many persistent blocks as 132 SMs (the H200's) hold at once by threads
// and shared memory; nullopt where the chain cannot have them.
std::optional<Variant> Bulk(const Chain& chain, const KernelGroup& group, int threads,
                            int stages) {
  auto r = AnalyzeRows(chain);
  if (!r.ok() || !r->width.is_static()) return std::nullopt;
  Variant v = Make(16 / row_internal::WidestElementBytes(chain, *r), threads, 1, 3);
  v.params["stages"] = stages;
  v.params["grid"] = 132;
  // Rows from a counter: blocks that stream faster take more (the H200's
  // run106: the 50257-wide softmax's blocks of every 132nd row ended from
  // 126 to 143 us, 133 to 141 with the counter; bf16 0.883 -> 0.915 of
  // memcpy at 1024 threads, f32 0.882 -> 0.929).
  v.params["dyn"] = 1;
  absl::StatusOr<Plan> p = MakePlan(chain, group, v, Numerics::kFast);
  if (!p.ok()) return std::nullopt;
  // 228 KiB of shared memory an SM; a block also takes 1 KiB the system
  // reserves and up to 1 KiB of static shared memory.
  const int64_t by_smem = 228 * 1024 / (p->stage_bytes + 2 * 1024);
  v.params["grid"] = 132 * std::clamp<int64_t>(std::min<int64_t>(by_smem, 2048 / threads), 1, 32);
  return v;
}

// Register-resident rows of 4-byte elements load under policy=1 (their
// lines L2 evict_last): on the H200 (run86) RMSNorm f32 4096 2.9-3.7%,
// LayerNorm f32 8192 3.5% and softmax f32 4096 1.9% faster, as torch.compile's
// kernels load them; the same loads made bf16 rows 12-15% slower.
Variant WithPolicy(const Shape& s, Variant v) {
  if (v.Get("resident") == 1 && v.Get("split", 1) == 1 && s.widest == 4) v.params["policy"] = 1;
  return v;
}

// The heuristic's choice among schedules every supported GPU runs (sm_80).
Variant PortableHeuristic(const Chain& chain, const KernelGroup& group) {
  Shape s = ShapeOf(chain);
  int vec = s.vecs.empty() ? 1 : s.vecs.front();
  const int64_t width = s.width > 0 ? s.width : 4096;
  auto threads_for = [&](int v) {  // At least four vectors a thread.
    return std::clamp(Pow2Floor(width / (4 * v)), 32, 1024);
  };
  auto per_thread = [&](int t, int v) {
    return (width + int64_t{t} * v - 1) / (int64_t{t} * v) * v;
  };
  auto rows_for = [](int t) { return t >= 128 ? 1 : 128 / t; };
  int threads = threads_for(vec);
  while (s.width > 0 && per_thread(threads, vec) * s.elem_inputs > kResidentHeuristic &&
         threads < 1024) {
    threads *= 2;
  }
  int resident =
      s.width > 0 && per_thread(threads, vec) * s.elem_inputs <= kResidentHeuristic ? 1 : 0;
  // Big blocks hold fewer registers a thread (MakePlan's budget).
  if (resident == 1 &&
      !CanGenerateRow(chain, group, Make(vec, threads, rows_for(threads), 1)).ok()) {
    resident = 0;
  }
  if (resident == 0 && s.width >= kSplitWidth) {
    // Wide rows: looped, 1024 threads of 4-element vectors (the H200's best
    // looped schedule for 50257-wide softmax in bf16 and f32, run30).
    std::vector<int> all = s.vecs;
    all.insert(all.end(), s.peel_vecs.begin(), s.peel_vecs.end());
    vec = 1;
    for (int v : all) {
      if (v <= 4) vec = std::max(vec, v);
    }
    threads = 1024;
  } else if (resident == 0 && !s.peel_vecs.empty() && s.peel_vecs.front() > vec) {
    vec = s.peel_vecs.front();
    threads = threads_for(vec);
  }
  return WithPolicy(s, Make(vec, threads, rows_for(threads), resident));
}

Variant PlainRowHeuristic(const Chain& chain, const KernelGroup& group) {
  Variant portable = PortableHeuristic(chain, group);
  const Shape s = ShapeOf(chain);
  if (portable.Get("resident") == 0 && s.width >= kSplitWidth) {
    // A row read in one pass gains nothing from staging: looped, 512
    // threads (the H200's run136: a cross-entropy's one online pass over
    // 50257-wide bf16 rows in 80.4 us at 512 threads, 92.7 at 1024, 90-123
    // bulk-staged).
    absl::StatusOr<Plan> looped = MakePlan(chain, group, portable, Numerics::kFast);
    if (looped.ok() && Passes(chain, *looped) == 1) {
      Variant v = portable;
      v.params["threads"] = 512;
      if (CanGenerateRow(chain, group, v).ok()) return v;
    }
    // Wide rows staged whole by bulk copies, two rows in flight a block
    // where shared memory holds them (the H200's run54: the 50257-wide
    // softmax at 0.85 / 0.82 of the copy bandwidth in bf16 / f32, where the
    // looped rows reached 0.71).
    for (int stages : {2, 1}) {
      if (std::optional<Variant> v = Bulk(chain, group, 512, stages)) return *v;
    }
  }
  return portable;
}

// Blocks a sliced row's grid wants in flight: two 1024-thread blocks an SM
// of the H200's 132.
constexpr int64_t kSlicedBlocks = 2 * 132;

// The rows a launch is expected to have: static sizes, symbols' hints (0
// where a hint is unknown).
int64_t ExpectedRows(const Chain& chain) {
  auto r = AnalyzeRows(chain);
  if (!r.ok()) return 0;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r->row_shape.size(); ++d) {
    const Dim& dim = r->row_shape[d];
    const int64_t n = dim.is_static() ? dim.size : chain.symbols[dim.symbol].hint;
    if (n <= 0 || rows > (int64_t{1} << 40) / n) return 0;
    rows *= n;
  }
  return rows;
}

// `v` (looped, one row a block) with its rows sliced over enough blocks
// to fill the GPU where there are few rows of many vectors a thread, each
// slice keeping at least eight vectors a thread; nullopt where slicing
// does not apply.
std::optional<Variant> Sliced(const Chain& chain, const KernelGroup& group, const Shape& s,
                              Variant v) {
  const int64_t rows = ExpectedRows(chain);
  if (s.width <= 0 || rows <= 0 || rows >= kSlicedBlocks || v.Get("resident") != 0 ||
      v.Get("rows") != 1) {
    return std::nullopt;
  }
  // A peeled row (an odd width) is sliced in scalars.
  for (int64_t vec : {v.Get("vec"), int64_t{1}}) {
    v.params["vec"] = vec;
    const int64_t per_slice = 8 * v.Get("threads") * vec;
    int64_t slices = 1;
    while (slices * rows < kSlicedBlocks && s.width / (slices * 2) >= per_slice) slices *= 2;
    if (slices == 1) return std::nullopt;
    v.params["slices"] = slices;
    if (CanGenerateRow(chain, group, v).ok()) return v;
  }
  return std::nullopt;
}

}  // namespace

Variant RowHeuristic(const Chain& chain, const KernelGroup& group) {
  const Variant h = PlainRowHeuristic(chain, group);
  const Shape s = ShapeOf(chain);
  // A row read in one pass into per-row values alone, of which there are
  // few: sliced over the grid (a 1-D total on one block read 82 GB/s on an
  // H100, run229).
  if (std::optional<Variant> v = Sliced(chain, group, s, h)) return *v;
  return h;
}

std::vector<Variant> RowSpace(const Chain& chain, const KernelGroup& group) {
  Shape s = ShapeOf(chain);
  if (s.vecs.empty()) return {};
  std::vector<int> vecs(s.vecs.begin(), s.vecs.begin() + std::min<size_t>(2, s.vecs.size()));
  std::set<Variant> seen;
  std::vector<Variant> out;
  auto add = [&](Variant v) {
    if (seen.insert(v).second && CanGenerateRow(chain, group, v).ok()) out.push_back(std::move(v));
  };
  const Variant heuristic = RowHeuristic(chain, group);
  add(heuristic);
  if (heuristic.params.count("slices")) {  // Fewer and more slices, and none.
    const int64_t slices = heuristic.Get("slices");
    for (int64_t n : {slices / 4, slices * 4}) {
      Variant v = heuristic;
      v.params["slices"] = n;
      if (n == 1) v.params.erase("slices");
      add(std::move(v));
    }
    add(PlainRowHeuristic(chain, group));
  }
  // What the heuristic would be on a GPU before sm_90: the tuner's seed
  // there (the first variant of the space that the GPU runs).
  add(PortableHeuristic(chain, group));
  if (heuristic.params.count("policy")) {  // Its plain loads too.
    Variant plain = heuristic;
    plain.params.erase("policy");
    add(std::move(plain));
  }
  if (heuristic.params.count("dyn")) {  // Its every gridDim.x-th row too.
    Variant fixed = heuristic;
    fixed.params.erase("dyn");
    add(std::move(fixed));
  }
  if (s.width >= kSplitWidth) {
    // Wide rows split over a cluster of blocks (sm_90), each block's share
    // of the row in registers: one HBM read a row, and no row long enough
    // to stall its block's loads while it reduces.
    int vec = s.vecs.front();
    if (!s.peel_vecs.empty()) vec = std::max(vec, s.peel_vecs.front());
    for (int split : {8, 4}) {
      for (int threads : {256, 512, 128, 64}) {
        Variant v = Make(vec, threads, 1, 1);
        v.params["split"] = split;
        // At most 256 bytes of a row's widest buffer a thread (rows are held
        // in their storage type; MakePlan's budget counts every input held):
        // NVRTC spilled an f32 LayerNorm's 99 elements.
        absl::StatusOr<Plan> p = MakePlan(chain, group, v, Numerics::kFast);
        if (p.ok() && int64_t{p->items} * p->vec * s.widest <= 256) add(std::move(v));
      }
    }
  }
  if (s.width >= kBulkWidth) {
    for (int threads : {512, 256, 1024}) {
      for (int stages : {2, 1, 3}) {
        if (std::optional<Variant> v = Bulk(chain, group, threads, stages)) add(std::move(*v));
      }
    }
  }
  auto sweep = [&](int vec, std::initializer_list<int> residents) {
    for (int threads : {32, 64, 128, 256, 512, 1024}) {
      // Skip teams wider than the row needs (beyond one warp).
      if (threads > 32 && s.width > 0 && int64_t{threads} * vec > s.width) continue;
      std::vector<int> rows = threads < 256 ? std::vector<int>{128 / threads, 256 / threads}
                                            : std::vector<int>{1};
      for (int r : rows) {
        for (int resident : residents) {
          if (resident == 2 && threads < 256) continue;  // Staging is for wide rows.
          add(WithPolicy(s, Make(vec, threads, std::max(r, 1), resident)));
        }
      }
    }
  };
  for (size_t i = 0; i < s.peel_vecs.size() && i < 2; ++i) sweep(s.peel_vecs[i], {1, 2, 0});
  for (int vec : vecs) sweep(vec, {1, 2, 0});
  return out;
}

}  // namespace kfuse
