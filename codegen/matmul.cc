#include "codegen/matmul.h"

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/analysis.h"
#include "codegen/matmul_plan.h"
#include "codegen/pointwise_layout.h"
#include "codegen/pointwise_views.h"
#include "core/status.h"

namespace kfuse {
namespace matmul_internal {
namespace {

// Dynamic shared memory a block may take on sm_90 (227 KiB).
constexpr int64_t kMaxSmemBytes = 227 * 1024;
// Accumulators per warp tile: (bm/wm) x (bn/wn) floats over 32 lanes; beyond
// 64 x 64 they spill.
constexpr int64_t kMaxWarpTile = 64 * 64;
constexpr int64_t kMaxGridYZ = 65535;

bool In(std::initializer_list<int64_t> set, int64_t v) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

absl::Status BadParam(const Variant& v, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("variant ", v.ToString(), ": ", what));
}

}  // namespace

SizeExpr Mul(const SizeExpr& a, const SizeExpr& b) {
  if (a.is_const() && b.is_const()) return SizeExpr::Const(a.value() * b.value());
  if (a.is_const() && a.value() == 1) return b;
  if (b.is_const() && b.value() == 1) return a;
  return SizeExpr::Mul(a, b);
}

bool IsOne(const Dim& d) { return d.is_static() && d.size == 1; }

std::vector<SizeExpr> DenseStrides(const std::vector<Dim>& shape) {
  std::vector<SizeExpr> s(shape.size(), SizeExpr::Const(1));
  SizeExpr run = SizeExpr::Const(1);
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = run;
    run = Mul(run, DimSize(shape[i]));
  }
  return s;
}

bool SameStrides(const std::vector<SizeExpr>& a, const std::vector<SizeExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].is_const() && b[i].is_const() && a[i].value() == b[i].value()) &&
        SizeCode(a[i]) != SizeCode(b[i])) {
      return false;
    }
  }
  return true;
}

namespace {

// Node `id` as another kernel's result: an intermediate, dense.
Access Stored(const Chain& c, int32_t id) {
  Access a;
  a.node = id;
  a.buffer = BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)};
  a.dtype = c.nodes[id].type.dtype;
  a.strides = DenseStrides(c.nodes[id].type.shape);
  return a;
}

// What a matmul kernel reads for node `id` (an operand, or a value its
// epilogue reads): Resolve's answer, but a view that is no view of a chain
// input (a slice, a transpose of a computed value) is the value an earlier
// kernel stores for it, as the matmul partition plans.
absl::StatusOr<Access> ResolveRead(const Chain& c, int32_t id, const std::set<int32_t>& mine) {
  if (IsLayout(c.nodes[id].kind) && !IsViewOfInput(c, id) && !mine.count(id)) return Stored(c, id);
  KFUSE_ASSIGN_OR_RETURN(Access a, Resolve(c, id, mine));
  if (a.divided()) {
    return absl::UnimplementedError(absl::StrCat(
        OpLabel(c, id), ": a broadcast dim merged into another is read by the attention kernel only"));
  }
  return a;
}

// `to`, a reshape of `from` (static) that only merges runs of dims, at
// constant strides `in`: each run's dims evenly spaced, then broadcast
// (stride 0), become one dim at the last spaced dim's stride, its index
// divided by the broadcast dims' product (repeat_kv's [Hkv, G] -> H:
// head h reads h / G). False otherwise.
bool MergeBroadcastRuns(const std::vector<Dim>& from, const std::vector<Dim>& to,
                        const std::vector<SizeExpr>& in, std::vector<SizeExpr>* strides,
                        std::vector<int64_t>* divisors) {
  auto is_static = [](const Dim& d) { return d.is_static(); };
  if (!std::all_of(from.begin(), from.end(), is_static) || !std::all_of(to.begin(), to.end(), is_static) ||
      !std::all_of(in.begin(), in.end(), [](const SizeExpr& s) { return s.is_const(); })) {
    return false;
  }
  strides->clear();
  divisors->clear();
  size_t i = 0;
  for (const Dim& t : to) {
    // The run of `from` dims making t (size-1 dims skipped).
    std::vector<size_t> run;
    int64_t product = 1;
    while (i < from.size() && (product < t.size || (t.size == 1 && run.empty() && from[i].size == 1))) {
      if (from[i].size != 1) run.push_back(i);
      product *= from[i].size;
      ++i;
      if (t.size == 1) break;
    }
    if (product != t.size) return false;
    size_t k = run.size();  // The broadcast suffix starts at run[k].
    while (k > 0 && in[run[k - 1]].value() == 0) --k;
    int64_t divisor = 1;
    for (size_t j = k; j < run.size(); ++j) divisor *= from[run[j]].size;
    for (size_t j = 0; j + 1 < k; ++j) {
      if (in[run[j]].value() != in[run[j + 1]].value() * from[run[j + 1]].size) return false;
    }
    strides->push_back(k == 0 ? SizeExpr::Const(0) : in[run[k - 1]]);
    divisors->push_back(k == 0 ? 1 : divisor);
  }
  while (i < from.size() && from[i].size == 1) ++i;
  return i == from.size();
}

}  // namespace

absl::StatusOr<Access> Resolve(const Chain& c, int32_t id, const std::set<int32_t>& mine) {
  const Node& n = c.nodes[id];
  if (n.kind == OpKind::kInput) {
    Access a;
    a.node = id;
    a.buffer = BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(n.input_index)};
    a.dtype = n.type.dtype;
    if (n.strides.empty()) {
      a.strides = DenseStrides(n.type.shape);
    } else {
      for (int64_t s : n.strides) a.strides.push_back(SizeExpr::Const(s));
    }
    return a;
  }
  if (n.kind == OpKind::kPermute) {
    KFUSE_ASSIGN_OR_RETURN(Access in, Resolve(c, n.args[0], mine));
    Access out = in;
    out.strides.clear();
    out.divisors.clear();
    for (int64_t p : n.axes) {
      out.strides.push_back(in.strides[p]);
      if (!in.divisors.empty()) out.divisors.push_back(in.divisors[p]);
    }
    return out;
  }
  if (n.kind == OpKind::kExpand) {
    KFUSE_ASSIGN_OR_RETURN(Access in, Resolve(c, n.args[0], mine));
    const std::vector<Dim>& from = c.nodes[n.args[0]].type.shape;
    const int off = n.type.rank() - static_cast<int>(from.size());
    Access out = in;
    out.strides.assign(n.type.rank(), SizeExpr::Const(0));
    if (in.divided()) out.divisors.assign(n.type.rank(), 1);
    for (int i = off; i < n.type.rank(); ++i) {
      if (!IsOne(from[i - off]) || IsOne(n.type.shape[i])) {
        out.strides[i] = in.strides[i - off];
        if (in.divided()) out.divisors[i] = in.divisors[i - off];
      }
    }
    return out;
  }
  if (n.kind == OpKind::kSlice) {
    KFUSE_ASSIGN_OR_RETURN(Access in, Resolve(c, n.args[0], mine));
    if (in.divided()) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(c, id), ": a slice of a broadcast dim merged into another is not read as a view yet"));
    }
    Access out = in;
    SizeExpr& stride = out.strides[n.axis];
    if (n.start != 0) {
      const SizeExpr skip = Mul(SizeExpr::Const(n.start), stride);
      out.offset = out.offset.is_const() && skip.is_const()
                       ? SizeExpr::Const(out.offset.value() + skip.value())
                       : SizeExpr::Add(out.offset, skip);
    }
    stride = IsOne(n.type.shape[n.axis]) ? SizeExpr::Const(0) : Mul(SizeExpr::Const(n.step), stride);
    return out;
  }
  if (n.kind == OpKind::kReshape) {
    // A view when its operand is dense (the new shape's dense strides), or
    // at constant strides a reshape keeps evenly spaced (a split dim, a
    // merge of dims one stride apart).
    KFUSE_ASSIGN_OR_RETURN(Access in, Resolve(c, n.args[0], mine));
    const std::vector<Dim>& from = c.nodes[n.args[0]].type.shape;
    Access out = in;
    if (in.divided()) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(c, id), ": a reshape of a broadcast dim merged into another is not read as a view yet"));
    }
    if (SameStrides(in.strides, DenseStrides(from))) {
      out.strides = DenseStrides(n.type.shape);
      return out;
    }
    std::vector<Mono> strides;
    for (const SizeExpr& s : in.strides) {
      if (!s.is_const()) break;
      strides.push_back(Mono{s.value(), {}});
    }
    if (strides.size() == in.strides.size()) {
      absl::StatusOr<std::vector<Mono>> st =
          pointwise_internal::ReshapeStrides(c, id, from, n.type.shape, std::move(strides));
      if (st.ok() && std::all_of(st->begin(), st->end(), [](const auto& m) { return m.is_static(); })) {
        out.strides.clear();
        for (const Mono& m : *st) out.strides.push_back(SizeExpr::Const(m.coef));
        return out;
      }
    }
    if (MergeBroadcastRuns(from, n.type.shape, in.strides, &out.strides, &out.divisors)) return out;
    return absl::UnimplementedError(absl::StrCat(
        OpLabel(c, id), ": a reshape of a strided operand that strides cannot say is not read as a view yet"));
  }
  if (n.kind == OpKind::kConstant || mine.count(id)) {
    return absl::UnimplementedError(absl::StrCat(
        OpLabel(c, id), ": as a matmul operand inside the product's kernel is not generated yet"));
  }
  return Stored(c, id);  // Another kernel's result.
}

std::vector<SizeExpr> Align(const Access& a, const std::vector<Dim>& shape,
                            const std::vector<Dim>& frame) {
  std::vector<SizeExpr> out(frame.size(), SizeExpr::Const(0));
  const int off = static_cast<int>(frame.size()) - static_cast<int>(shape.size());
  for (int i = std::max(off, 0); i < static_cast<int>(frame.size()); ++i) {
    const Dim& d = shape[i - off];
    if (!IsOne(d) || IsOne(frame[i])) out[i] = a.strides[i - off];
  }
  return out;
}

void CollectSymbols(const SizeExpr& e, std::set<int32_t>* out) {
  if (e.kind() == SizeExpr::Kind::kSymbol) {
    out->insert(static_cast<int32_t>(e.value()));
  } else if (!e.is_const()) {
    CollectSymbols(e.lhs(), out);
    CollectSymbols(e.rhs(), out);
  }
}

Precondition Divisible(const SizeExpr& e, int64_t by, std::string what) {
  Precondition p;
  p.kind = Precondition::Kind::kDivisible;
  p.expr = e;
  p.value = by;
  p.description = std::move(what);
  return p;
}

absl::Status CheckOperand(const Chain& c, int32_t mm, int which, const Access& a,
                          const Dim& contiguous_extent, std::vector<Precondition>* pre) {
  const std::string name = absl::StrCat(OpLabel(c, mm), " operand ", which == 0 ? "A" : "B");
  if (a.dtype != DType::kBF16 && a.dtype != DType::kF16) {
    return absl::UnimplementedError(absl::StrCat(
        name, ": ", std::string(DTypeName(a.dtype)),
        " operands are not generated yet (the tensor-core path takes f16 and bf16)"));
  }
  const size_t r = a.strides.size();
  for (size_t i = 0; i < r; ++i) {
    const SizeExpr& s = a.strides[i];
    const bool contiguous = s.is_const() && s.value() == 1;
    if (contiguous && (i == r - 1 || i == r - 2)) continue;
    if (s.is_const()) {
      if (s.value() % 8 != 0) {
        return absl::UnimplementedError(absl::StrCat(
            name, ": stride ", s.value(), " of dim ", i,
            " is not a multiple of 8 elements; 16-byte operand rows are needed"));
      }
    } else {
      pre->push_back(Divisible(s, 8, absl::StrCat(name, " stride of dim ", i,
                                                   " is a multiple of 8 (16-byte rows)")));
    }
  }
  if (a.offset.is_const()) {
    if (a.offset.value() % 8 != 0) {
      return absl::UnimplementedError(absl::StrCat(
          name, ": it starts ", a.offset.value(),
          " elements into its buffer, not a multiple of 8; 16-byte operand rows are needed"));
    }
  } else {
    pre->push_back(Divisible(a.offset, 8, absl::StrCat(name, " starts a multiple of 8 elements into its buffer")));
  }
  if (contiguous_extent.is_static()) {
    if (contiguous_extent.size % 8 != 0) {
      return absl::UnimplementedError(absl::StrCat(
          name, ": its contiguous extent ", contiguous_extent.size,
          " is not a multiple of 8 (16-byte rows) and is not generated yet"));
    }
  } else {
    pre->push_back(Divisible(DimSize(contiguous_extent), 8,
                             absl::StrCat(name, " contiguous extent is a multiple of 8")));
  }
  Precondition al;
  al.kind = Precondition::Kind::kAligned;
  al.buffer = a.buffer;
  al.value = 16;
  al.description = absl::StrCat(name, " is 16-byte aligned (cp.async)");
  pre->push_back(std::move(al));
  return absl::OkStatus();
}

namespace {

// OK when reduction `id` of `group` can run in the epilogue
// (WhyNotInEpilogue), over a value the group computes per element.
absl::Status CheckRowReduction(const Chain& chain, const KernelGroup& group, const Plan& p,
                               int32_t id) {
  const int32_t a = chain.nodes[id].args[0];
  std::string why = WhyNotInEpilogue(chain, p.matmul, id);
  if (why.empty() &&
      (std::find(group.nodes.begin(), group.nodes.end(), a) == group.nodes.end() ||
       p.per_row.count(a))) {
    why = "its operand must be computed per element in the kernel, in the product's shape";
  }
  if (why.empty()) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat(OpLabel(chain, id), ": not generated in a matmul's epilogue: ", why));
}

// cluster = 1: a tile's K slices are one cluster of CTAs (sm_90; at most
// eight, the portable cluster size).
absl::Status CheckCluster(const Variant& v, int64_t splitk, Plan* out) {
  const int64_t cluster = v.Get("cluster");
  if (cluster != 0 && cluster != 1) return BadParam(v, "cluster must be 0 or 1");
  if (cluster == 1 && !In({2, 4, 8}, splitk)) {
    return BadParam(v, "cluster 1 needs splitk 2, 4 or 8 (the CTAs of a cluster)");
  }
  out->cluster = cluster == 1;
  return absl::OkStatus();
}

// The streaming schedule (Plan::stream): each warp holds its share of the
// CTA's bm x bn accumulators (bm / 8 x 4 m16n8k16 products of 64 columns
// by 8 rows) and a batch of `stages` steps of B (eight 16-byte loads) and A
// (bm / 8 loads); the warps' partial sums meet in shared memory, wk x bm x
// (bn + 1) floats.
absl::Status CheckStream(const Variant& v, const Plan& p, Plan* out) {
  const int64_t bm = v.Get("bm"), bn = v.Get("bn"), wn = v.Get("wn"), wk = v.Get("wk"),
                stages = v.Get("stages"), splitk = v.Get("splitk");
  if (!p.a_kmajor) return BadParam(v, "stream needs a K-major A (rows of the product contiguous)");
  if (p.Rows()) return BadParam(v, "stream does not reduce rows in its epilogue");
  if (!In({8, 16, 32, 64}, bm)) return BadParam(v, "bm must be 8, 16, 32 or 64 with stream");
  if (!In({1, 2, 4, 8}, wn) || bn != 64 * wn) return BadParam(v, "bn must be 64 * wn, wn 1, 2, 4 or 8");
  if (!In({1, 2, 4, 8, 16}, wk)) return BadParam(v, "wk must be 1, 2, 4, 8 or 16");
  if (wn * wk > 16) return BadParam(v, "wn * wk (warps) must be at most 16");
  if (stages < 1 || stages > 4) return BadParam(v, "stages must be 1 to 4 with stream");
  // Registers a thread: the rings, the accumulators and about 48 more
  // (within 10 of what ptxas takes); above 240 the edges' address
  // arithmetic spills.
  const int64_t mt = bm / 8, regs = stages * (32 + 4 * mt) + 16 * mt + 48;
  if (regs > 240 || regs * 32 * wn * wk > 65536) {
    return BadParam(v, absl::StrCat("stream with bm ", bm, " and ", stages, " stages needs about ",
                                    regs, " registers a thread; at most 240, and 65536 a block"));
  }
  if (!In({1, 2, 4, 8, 16}, splitk)) return BadParam(v, "splitk must be 1, 2, 4, 8 or 16");
  if (splitk > 1 && p.k.is_static() && p.k.size / splitk < 32 * wk) {
    return BadParam(v, absl::StrCat("splitk ", splitk, " leaves slices of K = ", p.k.size,
                                    " shorter than a step (32) for each of wk ", wk, " warps"));
  }
  KFUSE_RETURN_IF_ERROR(CheckCluster(v, splitk, out));
  const int64_t smem = wk * bm * (bn + 1) * 4;
  if (smem > kMaxSmemBytes) {
    return BadParam(v, absl::StrCat("wk * bm * (bn + 1) * 4 = ", smem,
                                    " bytes of shared memory; at most ", kMaxSmemBytes));
  }
  out->stream = true;
  out->bm = static_cast<int>(bm);
  out->bn = static_cast<int>(bn);
  out->bk = 32;
  out->wm = 1;
  out->wn = static_cast<int>(wn);
  out->wk = static_cast<int>(wk);
  out->stages = static_cast<int>(stages);
  out->group = 1;
  out->splitk = static_cast<int>(splitk);
  out->smem_bytes = static_cast<int>(smem);
  return absl::OkStatus();
}

absl::Status CheckSchedule(const Variant& v, const Plan& p, Plan* out) {
  if (v.Get("stream") == 1) return CheckStream(v, p, out);
  if (v.Get("stream") != 0) return BadParam(v, "stream must be 0 or 1");
  const int64_t bm = v.Get("bm"), bn = v.Get("bn"), bk = v.Get("bk"), wm = v.Get("wm"),
                wn = v.Get("wn"), stages = v.Get("stages"), group = v.Get("group"),
                splitk = v.Get("splitk");
  if (!In({16, 32, 64, 128, 256}, bm)) return BadParam(v, "bm must be 16, 32, 64, 128 or 256");
  if (!In({32, 64, 128, 256}, bn)) return BadParam(v, "bn must be 32, 64, 128 or 256");
  if (!In({32, 64, 128}, bk)) return BadParam(v, "bk must be 32, 64 or 128");
  if (p.Rows() && bn < p.n.size) {
    return BadParam(v, absl::StrCat("bn ", bn, " is narrower than the rows (N = ", p.n.size,
                                    ") the epilogue reduces; a CTA's tile must hold them whole"));
  }
  if (!In({1, 2, 4, 8}, wm * wn) || wm < 1 || wn < 1) {
    return BadParam(v, "wm * wn (warps) must be 1, 2, 4 or 8");
  }
  if (bm % wm != 0 || (bm / wm) % 16 != 0) return BadParam(v, "bm / wm must be a multiple of 16");
  if (bn % wn != 0 || (bn / wn) % 16 != 0) return BadParam(v, "bn / wn must be a multiple of 16");
  if ((bm / wm) * (bn / wn) > kMaxWarpTile) {
    return BadParam(v, absl::StrCat("a warp tile of ", bm / wm, " x ", bn / wn,
                                    " holds too many accumulators (at most 64 x 64)"));
  }
  if (stages < 2 || stages > 6) return BadParam(v, "stages must be 2 to 6");
  if (!In({1, 2, 4, 8, 16}, splitk)) return BadParam(v, "splitk must be 1, 2, 4, 8 or 16");
  KFUSE_RETURN_IF_ERROR(CheckCluster(v, splitk, out));
  // Split K keeps its last-CTA flag after the stages; over a cluster, a
  // slice's partial tile takes the stages' place.
  const int64_t smem = out->cluster
                           ? std::max(stages * (bm + bn) * bk * 2, bm * bn * 4)
                           : stages * (bm + bn) * bk * 2 + (splitk > 1 ? 16 : 0);
  if (smem > kMaxSmemBytes) {
    return BadParam(v, absl::StrCat("stages * (bm + bn) * bk * 2 (+ 16 with split K; at least ",
                                    "bm * bn * 4 over a cluster) = ", smem,
                                    " bytes of shared memory; at most ", kMaxSmemBytes));
  }
  if (!In({1, 4, 8, 16}, group)) return BadParam(v, "group must be 1, 4, 8 or 16");
  if (splitk > 1 && p.k.is_static() && p.k.size / splitk < bk) {
    return BadParam(v, absl::StrCat("splitk ", splitk, " leaves slices of K = ", p.k.size,
                                    " shorter than bk ", bk));
  }
  out->bm = static_cast<int>(bm);
  out->bn = static_cast<int>(bn);
  out->bk = static_cast<int>(bk);
  out->wm = static_cast<int>(wm);
  out->wn = static_cast<int>(wn);
  out->stages = static_cast<int>(stages);
  out->group = static_cast<int>(group);
  out->splitk = static_cast<int>(splitk);
  out->smem_bytes = static_cast<int>(smem);
  return absl::OkStatus();
}

}  // namespace

SizeExpr DimSize(const Dim& d) {
  return d.is_static() ? SizeExpr::Const(d.size) : SizeExpr::Symbol(static_cast<uint32_t>(d.symbol));
}

std::string SizeCode(const SizeExpr& e) {
  switch (e.kind()) {
    case SizeExpr::Kind::kConst: return absl::StrCat(e.value(), "LL");
    case SizeExpr::Kind::kSymbol: return absl::StrCat("s", e.value());
    case SizeExpr::Kind::kAdd: return absl::StrCat("(", SizeCode(e.lhs()), " + ", SizeCode(e.rhs()), ")");
    case SizeExpr::Kind::kSub: return absl::StrCat("(", SizeCode(e.lhs()), " - ", SizeCode(e.rhs()), ")");
    case SizeExpr::Kind::kMul: return absl::StrCat("(", SizeCode(e.lhs()), " * ", SizeCode(e.rhs()), ")");
    case SizeExpr::Kind::kCeilDiv:
      return absl::StrCat("((", SizeCode(e.lhs()), " + ", SizeCode(e.rhs()), " - 1) / ",
                          SizeCode(e.rhs()), ")");
    case SizeExpr::Kind::kMin:
      return absl::StrCat("min(", SizeCode(e.lhs()), ", ", SizeCode(e.rhs()), ")");
    case SizeExpr::Kind::kMax:
      return absl::StrCat("max(", SizeCode(e.lhs()), ", ", SizeCode(e.rhs()), ")");
  }
  return "0LL";
}

std::string Offset(const std::vector<SizeExpr>& strides, const std::vector<std::string>& idx) {
  std::vector<std::string> terms;
  for (size_t i = 0; i < strides.size() && i < idx.size(); ++i) {
    const SizeExpr& s = strides[i];
    if (s.is_const() && s.value() == 0) continue;
    terms.push_back(s.is_const() && s.value() == 1 ? idx[i] : absl::StrCat(idx[i], " * ", SizeCode(s)));
  }
  return terms.empty() ? "0LL" : absl::StrJoin(terms, " + ");
}

std::string BatchDecomposition(const std::vector<Dim>& batch) {
  if (batch.empty()) return "";
  std::string s = "  long long kf_rem = eb;\n";
  for (size_t d = batch.size(); d-- > 0;) {
    const std::string size = SizeCode(DimSize(batch[d]));
    absl::StrAppend(&s, "  const long long kf_b", d, " = kf_rem % ", size, ";\n");
    if (d > 0) absl::StrAppend(&s, "  kf_rem /= ", size, ";\n");
  }
  return s;
}

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics) {
  if (group.family != Family::kMatmul) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel group is ", std::string(FamilyName(group.family)), ", not matmul"));
  }
  if (variant.family != Family::kMatmul) {
    return absl::InvalidArgumentError(
        absl::StrCat("variant ", variant.ToString(), " is not of the matmul family"));
  }
  Plan p;
  p.numerics = numerics;
  const std::set<int32_t> mine(group.nodes.begin(), group.nodes.end());
  for (int32_t id : group.nodes) {
    if (chain.nodes[id].kind != OpKind::kMatmul) continue;
    if (p.matmul >= 0) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(chain, id), ": one kernel computes one matmul; this group has two"));
    }
    p.matmul = id;
  }
  if (p.matmul < 0) return absl::InvalidArgumentError("matmul group without a matmul node");
  const Node& mm = chain.nodes[p.matmul];
  const std::vector<Dim>& out = mm.type.shape;
  p.batch.assign(out.begin(), out.end() - 2);
  p.m = out[out.size() - 2];
  p.n = out.back();
  p.k = chain.nodes[mm.args[0]].type.shape.back();

  // Operands, re-indexed over [batch.., M, K] and [batch.., K, N].
  for (int which = 0; which < 2; ++which) {
    const int32_t arg = mm.args[which];
    KFUSE_ASSIGN_OR_RETURN(Access a, ResolveRead(chain, arg, mine));
    std::vector<Dim> frame = p.batch;
    frame.push_back(which == 0 ? p.m : p.k);
    frame.push_back(which == 0 ? p.k : p.n);
    a.strides = Align(a, chain.nodes[arg].type.shape, frame);
    const size_t r = a.strides.size();
    auto unit = [&](size_t i) { return a.strides[i].is_const() && a.strides[i].value() == 1; };
    if (!unit(r - 1) && !unit(r - 2)) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(chain, p.matmul), " operand ", which == 0 ? "A: neither M nor K" : "B: neither K nor N",
          " is contiguous; such layouts are not generated yet"));
    }
    // The innermost dim wins when both are unit-stride (a dim of size 1).
    if (which == 0) {
      p.a_kmajor = unit(r - 1);
    } else {
      p.b_kmajor = !unit(r - 1);
    }
    const bool kmajor = which == 0 ? p.a_kmajor : p.b_kmajor;
    const Dim& extent = which == 0 ? (kmajor ? p.k : p.m) : (kmajor ? p.k : p.n);
    KFUSE_RETURN_IF_ERROR(CheckOperand(chain, p.matmul, which, a, extent, &p.preconditions));
    if (a.buffer.kind == BufferRef::Kind::kIntermediate) p.intermediates_read.push_back(a.node);
    (which == 0 ? p.a : p.b) = std::move(a);
  }
  if (chain.nodes[mm.args[0]].type.dtype != chain.nodes[mm.args[1]].type.dtype) {
    return absl::UnimplementedError(absl::StrCat(OpLabel(chain, p.matmul),
                                                 ": operands of different dtypes"));
  }

  // The epilogue and what it reads, over the output's dims.
  std::set<int32_t> read_nodes;
  const std::vector<Dim> per_row_shape = PerRowShape(out);
  for (int32_t id : group.nodes) {
    if (id == p.matmul) continue;
    const Node& n = chain.nodes[id];
    if (IsReduction(n.kind)) {
      KFUSE_RETURN_IF_ERROR(CheckRowReduction(chain, group, p, id));
      p.per_row.insert(id);
    } else if (!IsElementwise(n.kind) && n.kind != OpKind::kExpand) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(chain, id), ": only element-wise ops and reductions along short rows join a "
                              "matmul's epilogue"));
    } else if (std::any_of(n.args.begin(), n.args.end(),
                           [&](int32_t a) { return p.per_row.count(a) > 0; }) &&
               n.type.shape == per_row_shape) {
      for (int32_t a : n.args) {
        if (!p.per_row.count(a) && chain.nodes[a].kind != OpKind::kConstant) {
          return absl::UnimplementedError(absl::StrCat(
              OpLabel(chain, id), ": per-row work in a matmul's epilogue reads only per-row "
                                  "values and constants; ", OpLabel(chain, a), " is neither"));
        }
      }
      p.per_row.insert(id);
    }
    p.epilogue.push_back(id);
    for (int32_t a : n.args) {
      if (mine.count(a) || chain.nodes[a].kind == OpKind::kConstant) continue;
      read_nodes.insert(a);
    }
  }
  for (int32_t id : read_nodes) {
    // A chain input, or an intermediate of an earlier kernel.
    KFUSE_ASSIGN_OR_RETURN(Access a, ResolveRead(chain, id, mine));
    if (a.buffer.kind == BufferRef::Kind::kIntermediate) p.intermediates_read.push_back(id);
    a.strides = Align(a, chain.nodes[id].type.shape, out);
    p.reads.push_back(std::move(a));
  }
  std::sort(p.intermediates_read.begin(), p.intermediates_read.end());
  p.intermediates_read.erase(std::unique(p.intermediates_read.begin(), p.intermediates_read.end()),
                             p.intermediates_read.end());
  for (int32_t r : group.results) {
    if (!mine.count(r)) {
      return absl::InvalidArgumentError(absl::StrCat("group result ", r, " is not one of its nodes"));
    }
    if (chain.nodes[r].type.shape != out && !p.per_row.count(r)) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(chain, r),
          ": a result of a matmul kernel must have the product's shape or one value per row"));
    }
  }
  p.results = group.results;
  for (int32_t r : group.intermediates) {
    if (std::find(p.results.begin(), p.results.end(), r) == p.results.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("group intermediate ", r, " is not one of its results"));
    }
    p.written.push_back(r);
  }

  // The batch runs on grid.z; every kernel's tiles, the yardsticks' too,
  // on grid.x (bounded with the rest of the grid by the generators).
  for (const Dim& d : p.batch) p.batches = Mul(p.batches, DimSize(d));
  if (p.batches.is_const()) {
    if (p.batches.value() > kMaxGridYZ) {
      return absl::UnimplementedError(absl::StrCat(OpLabel(chain, p.matmul), ": the batch (",
                                                   p.batches.value(), ") exceeds ", kMaxGridYZ,
                                                   " blocks of a grid dimension"));
    }
  } else {
    Precondition c;
    c.kind = Precondition::Kind::kAtMost;
    c.expr = p.batches;
    c.value = kMaxGridYZ;
    c.description = absl::StrCat("the batch is at most ", kMaxGridYZ, " (a grid dimension)");
    p.preconditions.push_back(std::move(c));
  }
  std::set<int32_t> syms;
  for (const Dim& d : out) CollectSymbols(DimSize(d), &syms);
  CollectSymbols(DimSize(p.k), &syms);
  for (const Access* a : {&p.a, &p.b}) {
    for (const SizeExpr& s : a->strides) CollectSymbols(s, &syms);
  }
  for (const Access& a : p.reads) {
    for (const SizeExpr& s : a.strides) CollectSymbols(s, &syms);
  }
  p.symbols.assign(syms.begin(), syms.end());
  if (numerics == Numerics::kFast) {
    KFUSE_RETURN_IF_ERROR(CheckSchedule(variant, p, &p));
    p.pair = p.n.is_static() && p.n.size % 2 == 0;
    auto aligned = [&](BufferRef b, DType t, const std::string& what) {
      Precondition c;
      c.kind = Precondition::Kind::kAligned;
      c.buffer = b;
      c.value = 2 * DTypeBytes(t);
      c.description = absl::StrCat(what, " is ", c.value, "-byte aligned (paired stores)");
      p.preconditions.push_back(std::move(c));
    };
    const std::set<int32_t> results(p.results.begin(), p.results.end());
    for (size_t j = 0; p.pair && j < chain.outputs.size(); ++j) {
      if (!results.count(chain.outputs[j]) || p.per_row.count(chain.outputs[j])) continue;
      aligned(BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)},
              chain.nodes[chain.outputs[j]].type.dtype, absl::StrCat("output ", j));
    }
  }
  return p;
}

}  // namespace matmul_internal

using matmul_internal::MakePlan;
using matmul_internal::Plan;

absl::Status CanGenerateMatmul(const Chain& chain, const KernelGroup& group,
                               const Variant& variant) {
  return MakePlan(chain, group, variant, Numerics::kFast).status();
}

absl::StatusOr<KernelSpec> EmitMatmul(const Chain& chain, const KernelGroup& group,
                                      const Variant& variant, Numerics numerics) {
  KFUSE_ASSIGN_OR_RETURN(Plan plan, MakePlan(chain, group, variant, numerics));
  KFUSE_ASSIGN_OR_RETURN(matmul_internal::Source src, matmul_internal::WriteSource(chain, plan));
  KernelSpec k;
  k.entry = std::move(src.entry);
  k.source = std::move(src.text);
  for (int i = 0; i < chain.num_inputs(); ++i) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(i)}));
  }
  for (int32_t id : plan.intermediates_read) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)}));
  }
  const std::set<int32_t> results(plan.results.begin(), plan.results.end());
  for (size_t j = 0; j < chain.outputs.size(); ++j) {
    if (!results.count(chain.outputs[j])) continue;
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)}));
  }
  for (int32_t id : group.intermediates) {
    k.params.push_back(
        KernelParam::Buffer(BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)}));
  }
  const SizeExpr& batch = plan.batches;
  const bool fast = numerics == Numerics::kFast;
  const SizeExpr m = matmul_internal::DimSize(plan.m), n = matmul_internal::DimSize(plan.n);
  if (fast) {
    const SizeExpr tiles = SizeExpr::Mul(SizeExpr::CeilDiv(m, SizeExpr::Const(plan.bm)),
                                         SizeExpr::CeilDiv(n, SizeExpr::Const(plan.bn)));
    if (plan.splitk > 1 && !plan.cluster) {
      KernelParam ws;
      ws.kind = KernelParam::Kind::kWorkspace;
      ws.workspace_bytes = SizeExpr::Mul(
          SizeExpr::Mul(batch, tiles), SizeExpr::Const(int64_t{plan.splitk} * plan.bm * plan.bn * 4));
      k.params.push_back(ws);
      KernelParam counters;
      counters.kind = KernelParam::Kind::kWorkspace;
      counters.workspace_bytes = SizeExpr::Mul(SizeExpr::Mul(batch, tiles), SizeExpr::Const(4));
      counters.workspace_zeroed = true;
      k.params.push_back(counters);
    }
    k.grid.x = tiles;
    k.grid.y = SizeExpr::Const(plan.splitk);
    k.grid.z = batch;
    k.block.x = SizeExpr::Const(32 * plan.wm * plan.wn * plan.wk);
    k.dynamic_smem_bytes = static_cast<uint32_t>(plan.smem_bytes);
  } else if (plan.Rows()) {  // A block per row, a thread per column.
    k.grid.x = m;
    k.grid.z = batch;
    k.block.x = SizeExpr::Const((plan.n.size + 31) / 32 * 32);
  } else {
    k.grid.x = SizeExpr::Mul(SizeExpr::CeilDiv(m, SizeExpr::Const(16)),
                             SizeExpr::CeilDiv(n, SizeExpr::Const(16)));
    k.grid.z = batch;
    k.block.x = SizeExpr::Const(16);
    k.block.y = SizeExpr::Const(16);
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

Variant Make(int bm, int bn, int bk, int wm, int wn, int stages, int group, int splitk) {
  return Variant{Family::kMatmul,
                 {{"bm", bm}, {"bn", bn}, {"bk", bk}, {"wm", wm}, {"wn", wn},
                  {"stages", stages}, {"group", group}, {"splitk", splitk}}};
}

struct Sizes {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool rows = false;  // The epilogue reduces rows: bn must cover N.
};

Sizes SizesOf(const Chain& chain, const KernelGroup& group) {
  Sizes s;
  const std::vector<int64_t> values = SymbolValuesForTuning(chain);
  auto value = [&](const Dim& d) {
    return d.is_static() ? d.size : (d.symbol < static_cast<int32_t>(values.size()) ? values[d.symbol] : 1024);
  };
  for (int32_t id : group.nodes) {
    const Node& n = chain.nodes[id];
    s.rows = s.rows || IsReduction(n.kind);
    if (n.kind != OpKind::kMatmul) continue;
    const std::vector<Dim>& out = n.type.shape;
    s.m = value(out[out.size() - 2]);
    s.n = value(out.back());
    s.k = value(chain.nodes[n.args[0]].type.shape.back());
    for (size_t i = 0; i + 2 < out.size(); ++i) s.batch *= value(out[i]);
  }
  return s;
}

constexpr int64_t kSms = 132;  // The H200's; a wave's worth of CTAs.

// Few rows: narrow tiles along N with a full-height M tile, K split so that
// about `per_sm` CTAs an SM stream the weights.
Variant SmallM(const Sizes& s, int bn, int bk, int stages, int wm = 1, int per_sm = 2) {
  const int bm = s.m <= 16 ? 16 : s.m <= 32 ? 32 : 64;
  wm = std::min(wm, bm / 16);
  const int wn = std::min(8 / wm, std::min(4, bn / 16));
  const int64_t tiles = s.batch * ((s.n + bn - 1) / bn) * ((s.m + bm - 1) / bm);
  int splitk = 1;
  while (splitk < 16 && tiles * splitk * 2 <= per_sm * kSms && s.k / (splitk * 2) >= 4 * bk) {
    splitk *= 2;
  }
  return Make(bm, bn, bk, wm, wn, stages, 1, splitk);
}

// Few rows, K split over clusters (sm_90): wide tiles (A re-read from L2
// for fewer of them), about one CTA an SM. Run56 at M = 64 against 8192 x
// 8192 weights: a 64 x 128 tile in 2 x 4 warps, split in two, 39.5 us,
// where the 64 x 64 tiles took 42.0 over a cluster and 45.0 over the
// workspace (46.0 with the counters' zeroing).
Variant ClusterSmallM(const Sizes& s, int bn, int bk, int stages, int wm) {
  Variant v = SmallM(s, bn, bk, stages, wm, /*per_sm=*/1);
  if (v.Get("splitk") > 1 && v.Get("splitk") <= 8) v.params["cluster"] = 1;
  return v;
}

// Few rows, streamed (Plan::stream): a CTA of `wk` warps along K (and one
// of 64 columns along N) a strip of B, K split so that about one CTA an SM
// streams it.
Variant Stream(int bm, int wn, int wk, int stages, int splitk) {
  return Variant{Family::kMatmul,
                 {{"stream", 1}, {"bm", bm}, {"bn", 64 * wn}, {"bk", 32}, {"wm", 1}, {"wn", wn},
                  {"wk", wk}, {"stages", stages}, {"group", 1}, {"splitk", splitk}}};
}

Variant StreamFor(const Sizes& s, int bm, int wk, int stages, int wn = 1) {
  const int64_t tiles = s.batch * ((s.m + bm - 1) / bm) * ((s.n + 64 * wn - 1) / (64 * wn));
  int splitk = 1;
  while (splitk < 16 && tiles * splitk * 2 <= kSms && s.k / (splitk * 2) >= 64 * wk * stages) {
    splitk *= 2;
  }
  return Stream(bm, wn, wk, stages, splitk);
}

// The streamed heuristic: rows in tiles of at most 32 (registers), batches
// of two steps (run49: 3.55 TB/s at M = 16, against 3.39 and 3.29 for
// three and four); eight warps a CTA up to one tile an SM, four (two CTAs
// an SM) beyond.
int StreamRows(const Sizes& s) { return s.m <= 8 ? 8 : s.m <= 16 ? 16 : 32; }

Variant StreamHeuristic(const Sizes& s) {
  const int bm = StreamRows(s);
  const int64_t tiles = s.batch * ((s.m + bm - 1) / bm) * ((s.n + 63) / 64);
  return StreamFor(s, bm, tiles <= kSms ? 8 : 4, 2);
}

// The narrowest tile width that holds a whole row of N columns.
int RowTileN(int64_t n) { return n <= 32 ? 32 : n <= 64 ? 64 : n <= 128 ? 128 : 256; }

// A tile of bm x RowTileN(N) in `warps` warps, warp tiles at most 64 wide
// along N, or (whole) as wide as the tile: each warp then holds whole rows
// and reduces them without shared memory or barriers.
Variant RowTile(const Sizes& s, int bm, int bk, int stages, int warps, bool whole = false) {
  const int bn = RowTileN(s.n);
  const int wn = whole ? 1 : std::max(1, bn / 64);
  const int wm = std::min(bm / 16, warps / wn);
  return Make(bm, bn, bk, std::max(1, wm), wn, stages, 8, 1);
}

}  // namespace

int MatmulMinComputeCapability(const Variant& variant) {
  return variant.Get("cluster") == 1 ? 90 : 80;
}

Variant MatmulHeuristic(const Chain& chain, const KernelGroup& group) {
  const Sizes s = SizesOf(chain, group);
  if (s.rows) {
    // Few rows: the widest K step whose four stages fit shared memory.
    const int bn = RowTileN(s.n);
    return s.m <= 64 ? SmallM(s, bn, bn > 128 ? 64 : 128, 4) : RowTile(s, 128, 32, 4, 8);
  }
  if (s.m <= 32) {
    const Variant v = StreamHeuristic(s);
    return CanGenerateMatmul(chain, group, v).ok() ? v : SmallM(s, 64, 128, 4);
  }
  if (s.m <= 64) return ClusterSmallM(s, 128, 64, 4, 2);
  if (s.m >= 256 && s.n >= 256) return Make(128, 256, 32, 2, 4, 4, 8, 1);
  return Make(128, 128, 32, 2, 2, 4, 8, 1);
}

std::vector<Variant> MatmulSpace(const Chain& chain, const KernelGroup& group) {
  const Sizes s = SizesOf(chain, group);
  std::set<Variant> seen;
  std::vector<Variant> out;
  auto add = [&](Variant v) {
    if (out.size() < 24 && seen.insert(v).second && CanGenerateMatmul(chain, group, v).ok())
      out.push_back(std::move(v));
  };
  add(MatmulHeuristic(chain, group));
  // Split K over the workspace, and over a cluster where the target has
  // them (sm_90; the tuner skips what it cannot run).
  auto twin = [&](Variant v) {
    add(v);
    if (v.Get("splitk") > 1 && v.Get("splitk") <= 8) {
      v.params["cluster"] = 1;
      add(std::move(v));
    }
  };
  if (s.rows && s.m <= 64) {
    for (int bk : {128, 64}) {
      for (int stages : {4, 3, 6}) twin(SmallM(s, RowTileN(s.n), bk, stages));
    }
    Variant v = SmallM(s, RowTileN(s.n), 128, 4);
    for (int splitk : {1, 2, 4, 8, 16}) {
      v.params["splitk"] = splitk;
      twin(v);
    }
    twin(SmallM(s, RowTileN(s.n), 64, 4, /*wm=*/2));
    return out;
  }
  if (s.rows) {
    // Eight warps, or four (two CTAs an SM where the registers allow; their
    // 64 x 64 warp tiles and the epilogue's values leave no room for bk 64).
    for (int warps : {8, 4}) {
      for (int bm : {128, 256, 64}) {
        for (int bk : {32, 64}) {
          if (warps == 4 && bk == 64) continue;
          for (int stages : {4, 5}) add(RowTile(s, bm, bk, stages, warps));
        }
      }
    }
    for (int warps : {4, 8}) {
      for (int stages : {4, 5}) add(RowTile(s, 32 * warps, 32, stages, warps, /*whole=*/true));
    }
    return out;
  }
  if (s.m <= 64) {
    // Streamed B: the batch depth, the warps along K, taller tiles (fewer
    // re-reads of B from L2, fewer steps in flight), wider CTAs.
    auto streamed = [&] {
      const int bm = StreamRows(s);
      for (int stages : {2, 1, 3}) {
        for (int wk : {8, 4}) twin(StreamFor(s, bm, wk, stages));
      }
      if (s.m > 32) {
        for (int wk : {8, 4}) twin(StreamFor(s, 64, wk, 1));
      }
      twin(StreamFor(s, bm, 16, 2));
      twin(StreamFor(s, bm, 4, 2, /*wn=*/2));
    };
    auto tiled = [&] {
      // Wide tiles split over clusters first, each with its workspace twin.
      for (const auto& [bn, bk, stages, wm] : {std::array<int, 4>{128, 64, 4, 2}, {128, 64, 4, 1},
                                               {128, 128, 3, 1}, {128, 64, 6, 2},
                                               {256, 64, 3, 2}}) {
        Variant v = ClusterSmallM(s, bn, bk, stages, wm);
        add(v);
        v.params.erase("cluster");
        add(v);
      }
      for (int bn : {64, 128, 32}) {
        for (int bk : {128, 64}) {
          for (int stages : {4, 3, 6}) twin(SmallM(s, bn, bk, stages));
        }
      }
      Variant v = SmallM(s, 64, 128, 4);
      for (int splitk : {1, 2, 4, 8}) {
        v.params["splitk"] = splitk;
        twin(v);
      }
      // Tens of rows: more warps along M share the tensor work.
      for (int bn : {64, 128}) twin(SmallM(s, bn, 64, 4, /*wm=*/2));
    };
    // Up to 32 rows the streamed kernels win; at 64 the tiled ones (run55:
    // 44.9 us against 56-65 for every streamed one at M = 64, each re-read
    // of A or B from L2 costing as much as the weights' stream; run153:
    // 49-109 us for 64-row and wide streamed tiles against the cluster
    // tile's 39.5). Past 32 rows the tiled variants fill the space first.
    if (s.m > 32) {
      tiled();
      streamed();
    } else {
      streamed();
      tiled();
    }
    return out;
  }
  const int tiles[][4] = {{128, 256, 2, 4}, {256, 128, 4, 2}, {128, 128, 2, 2},
                          {128, 128, 2, 4}, {64, 256, 1, 4}, {256, 64, 4, 1}};
  for (const auto& t : tiles) {
    for (int bk : {32, 64}) {
      for (int stages : {3, 4, 5}) add(Make(t[0], t[1], bk, t[2], t[3], stages, 8, 1));
    }
  }
  return out;
}

}  // namespace kfuse
