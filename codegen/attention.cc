#include "codegen/attention.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/analysis.h"
#include "codegen/attention_plan.h"
#include "codegen/pointwise_layout.h"
#include "codegen/pointwise_views.h"
#include "core/status.h"

namespace kfuse {
namespace attention_internal {
namespace {

using matmul_internal::Align;
using matmul_internal::CheckOperand;
using matmul_internal::CollectSymbols;
using matmul_internal::DimSize;
using matmul_internal::Resolve;

constexpr int64_t kMaxSmemBytes = 227 * 1024;
// Accumulator floats a thread may hold (scores and outputs) before spilling.
constexpr int64_t kMaxAccumulators = 192;
// The fast kernel's score loops index rows and keys in 32 bits, a block past
// the end included.
constexpr int64_t kMaxSeq = (int64_t{1} << 31) - 256;

bool In(std::initializer_list<int64_t> set, int64_t v) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

absl::Status BadParam(const Variant& v, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("variant ", v.ToString(), ": ", what));
}

bool Unit(const SizeExpr& s) { return s.is_const() && s.value() == 1; }

absl::Status CheckSchedule(const Variant& v, Plan* p) {
  const int64_t bq = v.Get("bq"), bkv = v.Get("bkv"), warps = v.Get("warps"), order = v.Get("order");
  if (!In({64, 128}, bq)) return BadParam(v, "bq must be 64 or 128");
  if (!In({32, 64, 128}, bkv)) return BadParam(v, "bkv must be 32, 64 or 128");
  if (!In({4, 8}, warps)) return BadParam(v, "warps must be 4 or 8");
  if (bq % (16 * warps) != 0) return BadParam(v, "bq / warps must be a multiple of 16");
  if (!In({0, 1}, order)) return BadParam(v, "order must be 0 or 1");
  const int64_t rows = bq / (16 * warps);
  const int64_t acc = rows * (bkv / 8 + p->dv / 8) * 4;
  if (acc > kMaxAccumulators) {
    return BadParam(v, absl::StrCat("a thread would hold ", acc, " accumulators (", rows * 16,
                                    " rows of ", bkv, " scores and ", p->dv,
                                    " outputs per warp); at most ", kMaxAccumulators));
  }
  const int64_t smem = (bq * p->d + 2 * bkv * (p->d + p->dv)) * 2;
  if (smem > kMaxSmemBytes) {
    return BadParam(v, absl::StrCat("(bq * D + 2 * bkv * (D + Dv)) * 2 = ", smem,
                                    " bytes of shared memory; at most ", kMaxSmemBytes));
  }
  p->bq = static_cast<int>(bq);
  p->bkv = static_cast<int>(bkv);
  p->warps = static_cast<int>(warps);
  p->order = static_cast<int>(order);
  p->smem_bytes = static_cast<int>(smem);
  return absl::OkStatus();
}

// Operand `which` of matmul `mm` over `frame`, its dim `contiguous` (from the
// end: 1 the last, 2 the one before) unit-stride.
absl::StatusOr<Access> Operand(const Chain& c, int32_t mm, int which, const std::vector<Dim>& frame,
                               int contiguous, const char* name, const Dim& extent,
                               std::vector<Precondition>* pre) {
  const int32_t arg = c.nodes[mm].args[which];
  KFUSE_ASSIGN_OR_RETURN(Access a, Resolve(c, arg, {}));
  if (a.divided()) {
    // Divisors aligned as Align aligns the strides; batch dims alone.
    const std::vector<Dim>& shape = c.nodes[arg].type.shape;
    std::vector<int64_t> divisors(frame.size(), 1);
    const int off = static_cast<int>(frame.size()) - static_cast<int>(shape.size());
    for (int i = std::max(off, 0); i < static_cast<int>(frame.size()); ++i) divisors[i] = a.divisors[i - off];
    if (divisors[frame.size() - 1] != 1 || divisors[frame.size() - 2] != 1) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(c, mm), " operand ", which == 0 ? "A" : "B", " (", name,
          "): a broadcast dim merged into a row or head dim is not generated"));
    }
    a.divisors = std::move(divisors);
  }
  a.strides = Align(a, c.nodes[arg].type.shape, frame);
  if (!Unit(a.strides[a.strides.size() - contiguous])) {
    return absl::UnimplementedError(absl::StrCat(
        OpLabel(c, mm), " operand ", which == 0 ? "A" : "B", " (", name,
        "): the head dim is not contiguous; such layouts are not generated yet"));
  }
  KFUSE_RETURN_IF_ERROR(CheckOperand(c, mm, which, a, extent, pre));
  return a;
}

absl::StatusOr<int> HeadDim(const Chain& c, int32_t mm, const Dim& d, const char* name) {
  if (!d.is_static() || d.size % 16 != 0 || d.size > 256 || d.size <= 0) {
    return absl::UnimplementedError(absl::StrCat(
        OpLabel(c, mm), ": the ", name, " (", d.is_static() ? absl::StrCat(d.size) : "symbolic",
        ") must be static, a multiple of 16 and at most 256 for the fused attention kernel"));
  }
  return static_cast<int>(d.size);
}

// The leaves that `nodes` read (not in `mine`, not constants), aligned to
// `frame`.
absl::StatusOr<std::vector<Access>> Reads(const Chain& c, const std::vector<int32_t>& nodes,
                                          const std::set<int32_t>& mine,
                                          const std::vector<Dim>& frame) {
  std::set<int32_t> leaves;
  for (int32_t id : nodes) {
    for (int32_t a : c.nodes[id].args) {
      if (!mine.count(a) && c.nodes[a].kind != OpKind::kConstant) leaves.insert(a);
    }
  }
  std::vector<Access> out;
  for (int32_t id : leaves) {
    KFUSE_ASSIGN_OR_RETURN(Access a, Resolve(c, id, mine));
    if (a.divided()) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(c, id), ": a broadcast dim merged into another is read as Q, K or V only"));
    }
    a.node = id;
    a.strides = Align(a, c.nodes[id].type.shape, frame);
    out.push_back(std::move(a));
  }
  return out;
}

// Strides over pv's frame of output `o`, an epilogue node stored dense in
// its own shape: back through the views that lay it out to pv's shape.
// Whether a permute is among them in `permuted`.
absl::StatusOr<std::vector<SizeExpr>> LaidOut(const Chain& c, int32_t o, bool* permuted) {
  const std::vector<Dim>& shape = c.nodes[o].type.shape;
  std::vector<Mono> st(shape.size(), Mono{1, {}});
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * Mono::Of(shape[i]);
  *permuted = false;
  for (int32_t id = o; c.nodes[id].kind == OpKind::kReshape || c.nodes[id].kind == OpKind::kPermute;) {
    const Node& n = c.nodes[id];
    const std::vector<Dim>& from = c.nodes[n.args[0]].type.shape;
    if (n.kind == OpKind::kPermute) {
      std::vector<Mono> back(st.size());
      for (size_t k = 0; k < n.axes.size(); ++k) back[n.axes[k]] = st[k];
      st = std::move(back);
      *permuted = true;
    } else {
      KFUSE_ASSIGN_OR_RETURN(st, pointwise_internal::ReshapeStrides(c, id, n.type.shape, from, std::move(st)));
    }
    id = n.args[0];
  }
  std::vector<SizeExpr> out;
  for (const Mono& m : st) out.push_back(m.ToExpr());
  return out;
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics) {
  if (group.family != Family::kAttention) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel group is ", std::string(FamilyName(group.family)), ", not attention"));
  }
  if (variant.family != Family::kAttention) {
    return absl::InvalidArgumentError(
        absl::StrCat("variant ", variant.ToString(), " is not of the attention family"));
  }
  std::optional<AttentionMatch> m = MatchAttention(chain);
  if (!m) return absl::InvalidArgumentError("the chain is not an attention the family recognises");
  Plan p;
  p.numerics = numerics;
  p.m = *m;
  const Node& qk = chain.nodes[m->qk];
  const Node& pv = chain.nodes[m->pv];
  const std::vector<Dim>& sframe = qk.type.shape;
  const std::vector<Dim>& oframe = pv.type.shape;
  p.batch.assign(sframe.begin(), sframe.end() - 2);
  if (std::vector<Dim>(oframe.begin(), oframe.end() - 2) != p.batch) {
    return absl::UnimplementedError(absl::StrCat(
        OpLabel(chain, m->pv), ": its batch dims differ from the scores' (", OpLabel(chain, m->qk),
        "); V broadcasting to more batch dims is not generated yet"));
  }
  p.sq = sframe[sframe.size() - 2];
  p.sk = sframe.back();
  const Dim d = chain.nodes[qk.args[0]].type.shape.back();
  KFUSE_ASSIGN_OR_RETURN(p.d, HeadDim(chain, m->qk, d, "head dim"));
  KFUSE_ASSIGN_OR_RETURN(p.dv, HeadDim(chain, m->pv, oframe.back(), "value head dim"));
  // The yardsticks' rows a block: no more than Sq, and their static shared
  // memory (a reduction slot and a probability per thread and row, each
  // row's Q) within 48 KB. In double, 8 rows at D 256 take 32 KB.
  if (p.sq.is_static() && p.sq.size < p.yard_rows) {
    p.yard_rows = static_cast<int>(std::max<int64_t>(1, p.sq.size));
  }
  const int value_bytes = numerics == Numerics::kReference64 ? 8 : 4;
  while (p.yard_rows > 1 && p.yard_rows * (2 * 128 + p.d) * value_bytes > 48 * 1024) p.yard_rows /= 2;

  std::vector<Dim> qf = p.batch, kf = p.batch, vf = p.batch;
  qf.insert(qf.end(), {p.sq, d});
  kf.insert(kf.end(), {d, p.sk});
  vf.insert(vf.end(), {p.sk, oframe.back()});
  KFUSE_ASSIGN_OR_RETURN(p.q, Operand(chain, m->qk, 0, qf, 1, "Q", d, &p.preconditions));
  KFUSE_ASSIGN_OR_RETURN(p.k, Operand(chain, m->qk, 1, kf, 2, "K^T", d, &p.preconditions));
  // K^T [.., D, Sk] read as K [.., Sk, D].
  std::swap(p.k.strides[p.k.strides.size() - 1], p.k.strides[p.k.strides.size() - 2]);
  KFUSE_ASSIGN_OR_RETURN(p.v,
                         Operand(chain, m->pv, 1, vf, 1, "V", oframe.back(), &p.preconditions));
  if (chain.nodes[m->p].type.dtype != p.v.dtype) {
    return absl::UnimplementedError(absl::StrCat(OpLabel(chain, m->pv),
                                                 ": the probabilities' dtype is not V's"));
  }

  const std::set<int32_t> score(m->score.begin(), m->score.end());
  std::set<int32_t> score_mine = score;
  score_mine.insert(m->qk);
  KFUSE_ASSIGN_OR_RETURN(p.score_reads, Reads(chain, m->score, score_mine, sframe));
  std::set<int32_t> epi_mine(m->epilogue.begin(), m->epilogue.end());
  epi_mine.insert(m->pv);
  KFUSE_ASSIGN_OR_RETURN(p.epilogue_reads, Reads(chain, m->epilogue, epi_mine, oframe));
  for (int32_t o : chain.outputs) {
    if (!epi_mine.count(o) || p.laid_out.count(o)) continue;
    bool permuted = false;
    KFUSE_ASSIGN_OR_RETURN(std::vector<SizeExpr> st, LaidOut(chain, o, &permuted));
    if (permuted) p.laid_out[o] = std::move(st);
  }

  for (const Dim& x : p.batch) p.batches = matmul_internal::Mul(p.batches, DimSize(x));
  std::set<int32_t> syms;
  for (const Dim& x : sframe) CollectSymbols(DimSize(x), &syms);
  for (const Access* a : {&p.q, &p.k, &p.v}) {
    for (const SizeExpr& s : a->strides) CollectSymbols(s, &syms);
  }
  for (const auto* reads : {&p.score_reads, &p.epilogue_reads}) {
    for (const Access& a : *reads) {
      for (const SizeExpr& s : a.strides) CollectSymbols(s, &syms);
      CollectSymbols(a.offset, &syms);
    }
  }
  for (const Access* a : {&p.q, &p.k, &p.v}) CollectSymbols(a->offset, &syms);
  for (const auto& [o, strides] : p.laid_out) {
    for (const SizeExpr& s : strides) CollectSymbols(s, &syms);
  }
  p.symbols.assign(syms.begin(), syms.end());
  if (numerics == Numerics::kFast) {
    KFUSE_RETURN_IF_ERROR(CheckSchedule(variant, &p));
    for (const auto& [what, dim] : {std::pair<const char*, Dim>{"query length", p.sq}, {"key length", p.sk}}) {
      const SizeExpr e = DimSize(dim);
      if (e.is_const()) {
        if (e.value() > kMaxSeq) {
          return absl::UnimplementedError(absl::StrCat(OpLabel(chain, m->qk), ": the ", what, " (",
                                                       e.value(), ") exceeds ", kMaxSeq,
                                                       " for the fused attention kernel"));
        }
        continue;
      }
      Precondition c;
      c.kind = Precondition::Kind::kAtMost;
      c.expr = e;
      c.value = kMaxSeq;
      c.description = absl::StrCat("the ", what, " is at most ", kMaxSeq, " (32-bit indexing)");
      p.preconditions.push_back(std::move(c));
    }
    // Outputs of the product's shape are stored two columns at a time.
    const std::set<int32_t> epi(m->epilogue.begin(), m->epilogue.end());
    for (size_t j = 0; j < chain.outputs.size(); ++j) {
      const int32_t o = chain.outputs[j];
      if (o != m->pv && !epi.count(o)) continue;
      Precondition c;
      c.kind = Precondition::Kind::kAligned;
      c.buffer = BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)};
      c.value = 2 * DTypeBytes(chain.nodes[o].type.dtype);
      c.description = absl::StrCat("output ", j, " is ", c.value, "-byte aligned (paired stores)");
      p.preconditions.push_back(std::move(c));
    }
  }
  return p;
}

}  // namespace attention_internal

using attention_internal::MakePlan;
using attention_internal::Plan;

absl::Status CanGenerateAttention(const Chain& chain, const KernelGroup& group,
                                  const Variant& variant) {
  return MakePlan(chain, group, variant, Numerics::kFast).status();
}

absl::StatusOr<KernelSpec> EmitAttention(const Chain& chain, const KernelGroup& group,
                                         const Variant& variant, Numerics numerics) {
  KFUSE_ASSIGN_OR_RETURN(Plan plan, MakePlan(chain, group, variant, numerics));
  KFUSE_ASSIGN_OR_RETURN(matmul_internal::Source src,
                         attention_internal::WriteSource(chain, plan));
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
  const SizeExpr sq = matmul_internal::DimSize(plan.sq);
  if (numerics == Numerics::kFast) {
    k.grid.x = SizeExpr::Mul(SizeExpr::CeilDiv(sq, SizeExpr::Const(plan.bq)), plan.batches);
    k.block.x = SizeExpr::Const(32 * plan.warps);
    k.dynamic_smem_bytes = static_cast<uint32_t>(plan.smem_bytes);
  } else {
    k.grid.x = SizeExpr::Mul(SizeExpr::CeilDiv(sq, SizeExpr::Const(plan.yard_rows)), plan.batches);
    k.block.x = SizeExpr::Const(128);
  }
  for (int32_t s : plan.symbols) {
    k.params.push_back(KernelParam::Scalar(SizeExpr::Symbol(static_cast<uint32_t>(s)), DType::kI64));
  }
  k.preconditions = std::move(plan.preconditions);
  k.variant = variant;
  for (int32_t id : group.nodes) k.ops.push_back(static_cast<uint32_t>(id));
  k.partition_reason = group.reason;
  return k;
}

namespace {

Variant Make(int bq, int bkv, int warps, int order = 0) {
  return Variant{Family::kAttention, {{"bq", bq}, {"bkv", bkv}, {"warps", warps}, {"order", order}}};
}

int64_t ValueHeadDim(const Chain& chain, const KernelGroup& group) {
  int64_t dv = 128;
  for (int32_t id : group.nodes) {  // Ascending: P V, the later matmul, last.
    const Node& n = chain.nodes[id];
    if (n.kind == OpKind::kMatmul && n.type.shape.back().is_static()) dv = n.type.shape.back().size;
  }
  return dv;
}

}  // namespace

Variant AttentionHeuristic(const Chain& chain, const KernelGroup& group) {
  // FlashAttention-2's choices: 128 query rows in four warps and 64 keys per
  // block, half the rows per CTA when the output row is wide.
  return ValueHeadDim(chain, group) > 128 ? Make(64, 64, 4) : Make(128, 64, 4);
}

std::vector<Variant> AttentionSpace(const Chain& chain, const KernelGroup& group) {
  std::set<Variant> seen;
  std::vector<Variant> out;
  auto add = [&](Variant v) {
    if (seen.insert(v).second && CanGenerateAttention(chain, group, v).ok()) out.push_back(std::move(v));
  };
  add(AttentionHeuristic(chain, group));
  for (int bq : {128, 64}) {
    for (int bkv : {64, 32, 128}) {
      for (int warps : {4, 8}) add(Make(bq, bkv, warps));
    }
  }
  // Causal: the same tiles, every head's heaviest blocks first.
  std::optional<AttentionMatch> m = MatchAttention(chain);
  if (m && m->causal) {
    const size_t base = out.size();
    for (size_t i = 0; i < base && i < 4; ++i) {
      Variant v = out[i];
      v.params["order"] = 1;
      add(std::move(v));
    }
  }
  return out;
}

}  // namespace kfuse
