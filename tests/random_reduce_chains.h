// A seeded generator of random, valid chains that reduce, for property
// tests: random element-wise work (random_chains.h's) before reductions
// (sum, max, min, mean) along rows, over outer axes (plans of several
// kernels with intermediates) or over every axis, kept or not, their
// results broadcast back and combined with the elements (softmax,
// log_softmax, centring, normalisation, scaling by a positive statistic,
// masks), a statistic of per-row statistics (a loss's mean), several
// outputs, in f32, bf16 and f16, over static or symbolic row counts and
// odd widths.
// Chains are built so that a correct plan stays within eager PyTorch's
// error of the fp64 reference: exp only of values bounded above (at most 0
// after a max is subtracted, else at most 8); divisors, logs and rsqrt only
// of statistics at least 1 (sums of exps, x*x + 1, |x| + 1) or of a
// variance plus eps over at least 7 elements of an input; no discontinuous
// op on a computed value; no squeezing function (tanh, a clamp, exp) of a
// sum of values of either sign, nor silu, gelu or softplus of values far
// below 0 (see Term); magnitudes tracked so that nothing overflows f16.
//
//   RandomChain rc = MakeRandomReduceChain(seed);  // validated, canonical
//   std::vector<std::vector<double>> in = RandomInputs(rc, seed);
#ifndef KFUSE_TESTS_RANDOM_REDUCE_CHAINS_H_
#define KFUSE_TESTS_RANDOM_REDUCE_CHAINS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/ir.h"
#include "codegen/reduce_test_chains.h"
#include "codegen/validate.h"
#include "core/dtype.h"
#include "core/status.h"
#include "tests/random_chains.h"

namespace kfuse::testing_chains {

namespace reduce_internal {

using internal::Broadcast;
using internal::Chance;
using internal::Pick;

// Where a value lies against the rows [lead..., W] the chain reduces, by
// its shape.
enum class Frame : uint8_t {
  kFull,   // [lead..., W].
  kRow,    // [lead..., 1]: a kept reduction along rows, or work on those.
  kOuter,  // Full rank, some lead dims 1: kept reductions over outer axes
           // (or every axis), which broadcast back.
  kStat,   // Anything else: a reduction not kept, or work on those.
};

struct Term {
  int32_t node = -1;
  DType dtype = DType::kInvalid;
  double bound = 0;  // |value| <= bound (roughly).
  double floor = 0;  // When > 0: value >= floor (a safe divisor or log argument).
  std::vector<Dim> shape;
  // Whether a plan can write it as an output: a full row, one value per
  // row, or a reduction's own result. Element-wise work on results of
  // reductions over other axes is only read (the last kernel of a plan is
  // a row or pointwise kernel over the rows).
  bool output_ok = true;
  // For a reduction not kept, or work on those, which axes it reduced
  // ("" for others): its dims are not aligned with the rows', so it meets
  // only values of its own shape reduced over the same axes.
  std::string stat;
  // Computed from a sum of values of either sign. A plan adds in f32 (the
  // eager yardstick, kEager, adds in double), so such a sum is off by a few
  // units of its partial sums' last place, which may be far above the
  // sum's own: fine beside the largest sums (the tolerance scales with
  // them), not through a function that squeezes them (tanh, a clamp) while
  // passing the error of small ones on, nor inside exp (softmax), whose
  // relative error is its operand's absolute one.
  bool cancels = false;
  // Computed from values at most 0 and possibly far below (v - max(v), a
  // log_softmax). silu, gelu and softplus of those are all in their tails,
  // where f32 formulas (1 + tanh(z) with tanh(z) near -1, as PyTorch's own)
  // keep few bits, and the largest output is tiny: no tolerance scaled by
  // it covers that.
  bool nonpositive = false;
};

inline bool IsFloatType(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
}

// Whether every dim of `a` is 1 or `b`'s (right-aligned): `a` broadcasts to `b`.
inline bool BroadcastsTo(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() > b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Dim& x = a[a.size() - 1 - i];
    if (x != Dim::Static(1) && x != b[b.size() - 1 - i]) return false;
  }
  return true;
}

// Builds reductions and the work around them over values of one row shape
// `full` ([lead..., W]), whose dims take sizes `sizes` (symbols bound).
class ReduceBuilder {
 public:
  ReduceBuilder(Chain& c, std::mt19937_64& rng, std::vector<Dim> full, std::vector<int64_t> sizes)
      : c_(c), rng_(rng), full_(std::move(full)), sizes_(std::move(sizes)) {}

  // The element-wise work so far (random_chains' Builder's values):
  // numbers become terms, exact bools (inputs, comparisons of inputs) masks.
  void TakeElementwise(const std::vector<internal::Value>& values) {
    for (const internal::Value& v : values) {
      if (c_.nodes[v.node].kind == OpKind::kConstant) continue;
      const std::vector<Dim> shape = ShapeOfElementwise(v.node);
      if (v.dtype == DType::kBool) {
        if (v.is_input) masks_.push_back(v.node);
        continue;
      }
      const Frame f = FrameOf(shape);
      terms_.push_back(
          Term{v.node, v.dtype, v.bound, 0, shape, f == Frame::kFull || f == Frame::kRow, ""});
    }
  }

  // One random reduction, or work combining reduced values with others;
  // false when it found none that keeps the chain well behaved.
  bool Step() {
    switch (std::uniform_int_distribution<int>(0, 7)(rng_)) {
      case 0:
        return Statistic();
      case 1:
      case 2:
        return Softmax();
      case 3:
        return Normalize();
      case 4:
        return Scale();
      case 5:
        return StatisticOfRowStatistics();
      default:
        return Mix();
    }
  }

  // One element-wise op over the terms (results of reductions mixed with
  // the elements, a smooth function of a statistic, a mask).
  bool Mix() {
    if (Chance(rng_, 0.35)) return Unary();
    if (!masks_.empty() && Chance(rng_, 0.3)) return Where();
    return Binary();
  }

  const std::vector<Term>& terms() const { return terms_; }
  // Terms a reduction move made (not element-wise work before any).
  const std::vector<size_t>& reduced() const { return reduced_; }

 private:
  int rank() const { return static_cast<int>(full_.size()); }

  Frame FrameOf(const std::vector<Dim>& s) const {
    if (s == full_) return Frame::kFull;
    if (s.size() != full_.size()) return Frame::kStat;
    std::vector<Dim> row = full_;
    row.back() = Dim::Static(1);
    if (s == row) return Frame::kRow;
    return BroadcastsTo(s, full_) ? Frame::kOuter : Frame::kStat;
  }

  std::vector<Dim> ShapeOfElementwise(int32_t id) {
    auto it = shapes_.find(id);
    if (it != shapes_.end()) return it->second;
    const Node& n = c_.nodes[id];
    std::vector<Dim> s;
    if (n.kind == OpKind::kInput) {
      s = n.type.shape;
    } else if (n.kind != OpKind::kConstant) {
      for (int32_t a : n.args) s = Broadcast(s, ShapeOfElementwise(a));
    }
    shapes_[id] = s;
    return s;
  }

  Term Push(Term t) {
    shapes_[t.node] = t.shape;
    terms_.push_back(t);
    return t;
  }

  // A term by `pred`, or nullptr when none fits.
  template <typename Pred>
  const Term* PickWhere(Pred pred) {
    std::vector<const Term*> fit;
    for (const Term& t : terms_)
      if (pred(t)) fit.push_back(&t);
    return fit.empty() ? nullptr : Pick(rng_, fit);
  }

  // A full-row operand of floating type: a float term, or an integer or
  // bool term cast (exactly: they are computed from inputs only) to the
  // chain's first input's dtype.
  std::optional<Term> PickFull(double max_bound = 1e30, bool cancels_ok = true) {
    const Term* t = PickWhere([&](const Term& t) {
      return FrameOf(t.shape) == Frame::kFull && t.bound <= max_bound && (cancels_ok || !t.cancels);
    });
    if (t == nullptr) return std::nullopt;
    if (IsFloatType(t->dtype)) return *t;
    const DType to = c_.nodes[0].type.dtype;
    Term cast = *t;
    cast.node = c_.AddCast(t->node, to);
    cast.dtype = to;
    cast.bound = t->bound + 1;
    if (to == DType::kF16 && cast.bound > 3e4) return std::nullopt;
    return Push(cast);
  }

  // A full float input, or a monotone function of one: values spread over
  // every row and column, whose variance is far from 0 (of a clamped value,
  // max(x, 3) say, a row can be constant while rounding of its mean leaves
  // the centred values not quite 0, which normalisation magnifies).
  std::optional<Term> PickSpread() {
    const Term* x = PickWhere([&](const Term& t) {
      return c_.nodes[t.node].kind == OpKind::kInput && t.shape == full_ && IsFloatType(t.dtype);
    });
    if (x == nullptr) return std::nullopt;
    const Term xt = *x;
    if (Chance(rng_, 0.5)) return xt;
    return Elementwise(Chance(rng_, 0.5) ? OpKind::kTanh : OpKind::kSigmoid, {&xt}, xt.dtype, 1);
  }

  // Lead axes [0, rank - 1) that a reduction over outer axes takes.
  std::vector<int64_t> OuterAxes() {
    if (rank() == 2) return {0};
    return Pick(rng_, std::vector<std::vector<int64_t>>{{1}, {0, 1}, {0}});
  }

  // Reduction axes: along rows mostly, else over outer axes or every axis.
  std::vector<int64_t> PickAxes() {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (u < 0.6) return {rank() - 1};
    if (u < 0.9) return OuterAxes();
    std::vector<int64_t> all;
    for (int a = 0; a < rank(); ++a) all.push_back(a);
    return all;
  }

  int64_t Count(const std::vector<int64_t>& axes) const {
    int64_t n = 1;
    for (int64_t a : axes) n *= sizes_[a];
    return n;
  }

  // `kind` of `v` over `axes`: bound, floor and shape follow. Refuses
  // (nullopt) an f16 sum that could overflow.
  std::optional<Term> Reduce(OpKind kind, const Term& v, const std::vector<int64_t>& axes,
                             bool keepdim) {
    const int64_t n = Count(axes);
    const bool sum = kind == OpKind::kReduceSum;
    const double bound = sum ? v.bound * n : v.bound;
    if (v.dtype == DType::kF16 && bound > 3e4) return std::nullopt;
    Term r;
    r.node = reduce_test::Reduce(&c_, kind, v.node, axes, keepdim);
    r.dtype = v.dtype;
    r.bound = bound;
    r.floor = sum ? v.floor * n : v.floor;
    r.cancels = v.cancels || (sum && v.floor <= 0);
    r.nonpositive = v.nonpositive;
    for (int a = 0; a < static_cast<int>(v.shape.size()); ++a) {
      if (std::find(axes.begin(), axes.end(), a) == axes.end())
        r.shape.push_back(v.shape[a]);
      else if (keepdim)
        r.shape.push_back(Dim::Static(1));
    }
    r.output_ok = true;
    // Kept, a reduction of a statistic is one still (of its own shape).
    if (!keepdim || !v.stat.empty())
      r.stat = absl::StrCat(v.stat, "/", absl::StrJoin(axes, ","), keepdim ? "k" : "");
    return r;
  }

  // An element-wise op over terms `args` giving dtype `t`, bound, floor.
  Term Elementwise(OpKind k, const std::vector<const Term*>& args, DType t, double bound,
                   double floor = 0) {
    std::vector<int32_t> ids;
    std::vector<Dim> shape;
    bool output_ok = true;
    std::string stat;
    bool cancels = false, nonpositive = false;
    for (const Term* a : args) {
      ids.push_back(a->node);
      shape = Broadcast(shape, a->shape);
      if (!a->stat.empty()) stat = a->stat;
      cancels = cancels || a->cancels;
      nonpositive = nonpositive || a->nonpositive;
    }
    const Frame f = FrameOf(shape);
    if (f == Frame::kOuter) output_ok = false;
    // Work on per-row statistics (rows reduced, not kept) stays writable;
    // on statistics of other axes it does not.
    if (f == Frame::kStat) output_ok = stat == absl::StrCat("/", rank() - 1);
    return Push(Term{c_.AddOp(k, std::move(ids)), t, bound, floor, shape, output_ok, stat, cancels,
                     nonpositive});
  }

  Term Constant(double v) {
    return Term{
        c_.AddConstant(v), DType::kF32, std::abs(v), v > 0 ? v : 0, {}, false, "", false, false};
  }

  void Produced() { reduced_.push_back(terms_.size() - 1); }

  // A statistic of the rows, of outer axes or of everything, kept or not.
  bool Statistic() {
    std::optional<Term> v = PickFull();
    if (!v) return false;
    const OpKind k = Pick(rng_, std::vector<OpKind>{OpKind::kReduceSum, OpKind::kReduceMax,
                                                    OpKind::kReduceMin, OpKind::kReduceMean});
    std::optional<Term> r = Reduce(k, *v, PickAxes(), Chance(rng_, 0.5));
    if (!r) return false;
    Push(*r);
    Produced();
    return true;
  }

  // softmax, log_softmax or logsumexp along the axes: m = max(v) (or min),
  // e = exp(v - m) <= 1 (exp(m - v) with the min), s = sum(e) >= 1.
  bool Softmax() {
    std::optional<Term> v = PickFull(64, /*cancels_ok=*/false);
    if (!v) return false;
    const std::vector<int64_t> axes = PickAxes();
    const bool use_max = Chance(rng_, 0.8);
    std::optional<Term> m =
        Reduce(use_max ? OpKind::kReduceMax : OpKind::kReduceMin, *v, axes, true);
    if (!m) return false;
    const Term mt = Push(*m);
    Term dt = use_max ? Elementwise(OpKind::kSub, {&*v, &mt}, v->dtype, 2 * v->bound)
                      : Elementwise(OpKind::kSub, {&mt, &*v}, v->dtype, 2 * v->bound);
    dt.nonpositive = terms_.back().nonpositive = true;
    const Term et = Elementwise(OpKind::kExp, {&dt}, v->dtype, 1);
    std::optional<Term> s = Reduce(OpKind::kReduceSum, et, axes, true);
    if (!s) return false;
    s->floor = 1;  // The term of the max (or min) itself is exp(0).
    const Term st = Push(*s);
    const double log_n = std::log(static_cast<double>(Count(axes))) + 1;
    switch (std::uniform_int_distribution<int>(use_max ? 0 : 1, 2)(rng_)) {
      case 0: {  // logsumexp, one value per row (or column).
        const Term ls = Elementwise(OpKind::kLog, {&st}, st.dtype, log_n);
        Elementwise(OpKind::kAdd, {&ls, &mt}, st.dtype, mt.bound + log_n);
        break;
      }
      case 1:
        Elementwise(OpKind::kDiv, {&et, &st}, v->dtype, 1);
        break;
      default: {
        const Term ls = Elementwise(OpKind::kLog, {&st}, st.dtype, log_n);
        Elementwise(OpKind::kSub, {&dt, &ls}, v->dtype, dt.bound + log_n);
      }
    }
    Produced();
    return true;
  }

  // Centring by the mean, then LayerNorm's (v - mean) * rsqrt(var + eps)
  // or RMSNorm's v * rsqrt(mean(v * v) + eps), sometimes times a weight
  // [W]. Only over at least 7 elements: over fewer the variance can vanish
  // while rounding leaves the centred values not quite 0.
  bool Normalize() {
    std::optional<Term> v = PickSpread();
    if (!v) return false;
    std::vector<int64_t> axes = PickAxes();
    if (Count(axes) < 7) axes = std::vector<int64_t>(1, rank() - 1);
    if (Count(axes) < 7) return false;
    const double n = static_cast<double>(Count(axes));
    const Term eps = Constant(1e-5);
    const bool rms = Chance(rng_, 0.3);
    Term y;
    if (rms) {
      const Term sq = Elementwise(OpKind::kMul, {&*v, &*v}, v->dtype, v->bound * v->bound);
      std::optional<Term> ms = Reduce(OpKind::kReduceMean, sq, axes, true);
      if (!ms) return false;
      const Term mst = Push(*ms);
      const Term shifted = Elementwise(OpKind::kAdd, {&mst, &eps}, mst.dtype, mst.bound + 1);
      const Term inv = Elementwise(OpKind::kRsqrt, {&shifted}, mst.dtype, 1 / std::sqrt(1e-5));
      y = Elementwise(OpKind::kMul, {&*v, &inv}, v->dtype, std::sqrt(n) + 1);
    } else {
      std::optional<Term> mean = Reduce(OpKind::kReduceMean, *v, axes, true);
      if (!mean) return false;
      const Term mt = Push(*mean);
      const Term d = Elementwise(OpKind::kSub, {&*v, &mt}, v->dtype, 2 * v->bound);
      if (Chance(rng_, 0.3)) {
        Produced();
        return true;
      }
      const Term sq = Elementwise(OpKind::kMul, {&d, &d}, d.dtype, d.bound * d.bound);
      std::optional<Term> var = Reduce(OpKind::kReduceMean, sq, axes, true);
      if (!var) return false;
      const Term vt = Push(*var);
      const Term shifted = Elementwise(OpKind::kAdd, {&vt, &eps}, vt.dtype, vt.bound + 1);
      const Term inv = Elementwise(OpKind::kRsqrt, {&shifted}, vt.dtype, 1 / std::sqrt(1e-5));
      y = Elementwise(OpKind::kMul, {&d, &inv}, d.dtype, std::sqrt(n) + 1);
    }
    // An affine step with a [W] weight, when the element-wise work made one.
    std::vector<Dim> w_shape = {full_.back()};
    const Term* w = PickWhere(
        [&](const Term& t) { return t.shape == w_shape && IsFloatType(t.dtype) && t.bound <= 16; });
    if (w != nullptr && Chance(rng_, 0.6)) {
      const Term wt = *w;
      Elementwise(OpKind::kMul, {&y, &wt}, Promote(y.dtype, wt.dtype), y.bound * wt.bound);
    }
    Produced();
    return true;
  }

  // v scaled by a statistic at least 1 of a positive function of u
  // (u * u + 1 or |u| + 1): v / s, v * rsqrt(s) or v * log(s).
  bool Scale() {
    std::optional<Term> u = PickFull(100);
    if (!u) return false;
    const Term one = Constant(1);
    Term p;
    if (Chance(rng_, 0.5)) {
      const Term sq = Elementwise(OpKind::kMul, {&*u, &*u}, u->dtype, u->bound * u->bound);
      p = Elementwise(OpKind::kAdd, {&sq, &one}, u->dtype, sq.bound + 1, 1);
    } else {
      const Term a = Elementwise(OpKind::kAbs, {&*u}, u->dtype, u->bound);
      p = Elementwise(OpKind::kAdd, {&a, &one}, u->dtype, a.bound + 1, 1);
    }
    const OpKind k = Pick(rng_, std::vector<OpKind>{OpKind::kReduceSum, OpKind::kReduceMax,
                                                    OpKind::kReduceMin, OpKind::kReduceMean});
    std::optional<Term> s = Reduce(k, p, PickAxes(), true);
    if (!s) return false;
    const Term st = Push(*s);
    std::optional<Term> v = PickFull(1e4);
    if (!v) return false;
    switch (std::uniform_int_distribution<int>(0, 2)(rng_)) {
      case 0:
        Elementwise(OpKind::kDiv, {&*v, &st}, Promote(v->dtype, st.dtype), v->bound);
        break;
      case 1: {
        const Term inv = Elementwise(OpKind::kRsqrt, {&st}, st.dtype, 1);
        Elementwise(OpKind::kMul, {&*v, &inv}, Promote(v->dtype, inv.dtype), v->bound);
        break;
      }
      default: {
        const double log_bound = std::log(st.bound) + 1;
        if (v->bound * log_bound > 3e4) return true;
        const Term lg = Elementwise(OpKind::kLog, {&st}, st.dtype, log_bound);
        Elementwise(OpKind::kMul, {&*v, &lg}, Promote(v->dtype, lg.dtype), v->bound * log_bound);
      }
    }
    Produced();
    return true;
  }

  // A loss's shape: a statistic of each row (not kept), then one over the
  // rows of those, sometimes after a smooth function of it.
  bool StatisticOfRowStatistics() {
    std::optional<Term> v = PickFull();
    if (!v) return false;
    const std::vector<OpKind> kinds = {OpKind::kReduceSum, OpKind::kReduceMax, OpKind::kReduceMin,
                                       OpKind::kReduceMean};
    std::optional<Term> r = Reduce(Pick(rng_, kinds), *v, {rank() - 1}, false);
    if (!r) return false;
    const Term rt = Push(*r);
    const Term per_row =
        Chance(rng_, 0.4) && !rt.cancels ? Elementwise(OpKind::kTanh, {&rt}, rt.dtype, 1) : rt;
    // Over the per-row results' rows ([R]: its only axis), or for [B, S]
    // over S, B (outer axes of the per-row results) or both.
    const std::vector<int64_t> axes =
        rank() == 2 ? std::vector<int64_t>{0}
                    : Pick(rng_, std::vector<std::vector<int64_t>>{{1}, {0}, {0, 1}});
    std::optional<Term> s = Reduce(Pick(rng_, kinds), per_row, axes, Chance(rng_, 0.3));
    if (!s) return false;
    Push(*s);
    Produced();
    return true;
  }

  // Smooth functions (bounded, or Lipschitz with a tracked bound) of any
  // term, as after a reduction; exp and square only of bounded values.
  bool Unary() {
    const Term* v = PickWhere([&](const Term& t) { return IsFloatType(t.dtype); });
    if (v == nullptr) return false;
    const Term vt = *v;
    std::vector<std::pair<OpKind, double>> ops = {
        {OpKind::kNeg, vt.bound}, {OpKind::kAbs, vt.bound}, {OpKind::kRelu, vt.bound}};
    if (!vt.nonpositive) {
      for (OpKind k : {OpKind::kSilu, OpKind::kGeluTanh, OpKind::kSoftplus})
        ops.push_back({k, vt.bound + 1});
    }
    if (!vt.cancels) {
      for (OpKind k : {OpKind::kTanh, OpKind::kSigmoid, OpKind::kSin, OpKind::kCos, OpKind::kErf})
        ops.push_back({k, 1});
      if (vt.bound <= 8) ops.push_back({OpKind::kExp, std::exp(vt.bound)});
    }
    if (vt.bound <= 100 && (vt.dtype != DType::kF16 || vt.bound <= 150))
      ops.push_back({OpKind::kSquare, vt.bound * vt.bound});
    if (vt.floor >= 1) ops.push_back({OpKind::kLog, std::log(vt.bound) + 1});
    if (vt.floor >= 1) ops.push_back({OpKind::kSqrt, std::sqrt(vt.bound)});
    const auto [k, bound] = Pick(rng_, ops);
    Elementwise(k, {&vt}, vt.dtype, bound);
    return true;
  }

  // Two terms that broadcast together, one of them a result of a
  // reduction or full, combined with a Lipschitz op whose result stays
  // bounded.
  bool Binary() {
    const Term* a = PickWhere([&](const Term& t) { return IsFloatType(t.dtype); });
    if (a == nullptr) return false;
    const Term at = *a;
    const Term* b =
        PickWhere([&](const Term& t) { return IsFloatType(t.dtype) && Compatible(at, t); });
    if (b == nullptr) return false;
    const Term bt = *b;
    std::vector<OpKind> ops = {OpKind::kAdd, OpKind::kSub};
    if (!at.cancels && !bt.cancels) {
      ops.push_back(OpKind::kMaximum);
      ops.push_back(OpKind::kMinimum);
    }
    if (at.bound * bt.bound <= 1e4) ops.push_back(OpKind::kMul);
    if (bt.floor >= 1) ops.push_back(OpKind::kDiv);
    const OpKind k = Pick(rng_, ops);
    const double bound = k == OpKind::kMul                        ? at.bound * bt.bound
                         : k == OpKind::kDiv                      ? at.bound / bt.floor
                         : k == OpKind::kAdd || k == OpKind::kSub ? at.bound + bt.bound
                                                                  : std::max(at.bound, bt.bound);
    const DType t = Promote(at.dtype, bt.dtype);
    if (bound > 3e4 && t == DType::kF16) return false;
    const double floor = k == OpKind::kAdd && at.floor > 0 && bt.floor > 0 ? at.floor + bt.floor
                         : k == OpKind::kMaximum ? std::max(at.floor, bt.floor)
                                                 : 0;
    Elementwise(k, {&at, &bt}, t, bound, floor);
    return true;
  }

  // where(mask, a, b) with an exact mask (an input or comparison of inputs).
  bool Where() {
    const int32_t m = Pick(rng_, masks_);
    const Term mask{m, DType::kBool, 1, 0, ShapeOfElementwise(m), true, ""};
    const Term* a =
        PickWhere([&](const Term& t) { return IsFloatType(t.dtype) && Compatible(mask, t); });
    if (a == nullptr) return false;
    const Term at = *a;
    const Term* b = PickWhere([&](const Term& t) {
      return IsFloatType(t.dtype) && Compatible(mask, t) && Compatible(at, t);
    });
    if (b == nullptr) return false;
    const Term bt = *b;
    Elementwise(OpKind::kWhere, {&mask, &at, &bt}, Promote(at.dtype, bt.dtype),
                std::max(at.bound, bt.bound), std::min(at.floor, bt.floor));
    return true;
  }

  // Terms an element-wise op may combine: both broadcast within the rows,
  // or both statistics of one shape over the same axes.
  bool Compatible(const Term& a, const Term& b) const {
    if (!a.stat.empty() || !b.stat.empty()) return a.stat == b.stat && a.shape == b.shape;
    return BroadcastsTo(a.shape, full_) && BroadcastsTo(b.shape, full_);
  }

  Chain& c_;
  std::mt19937_64& rng_;
  std::vector<Dim> full_;
  std::vector<int64_t> sizes_;
  std::vector<Term> terms_;
  std::vector<int32_t> masks_;
  std::vector<size_t> reduced_;
  std::map<int32_t, std::vector<Dim>> shapes_;
};

}  // namespace reduce_internal

// Reduction chain `index` of the suite (0, 1, ...): deterministic in `index`.
inline RandomChain MakeRandomReduceChain(int index) {
  using internal::Chance;
  using internal::Pick;
  std::mt19937_64 rng(0x7265647563ULL + static_cast<uint64_t>(index) * 104729);
  const std::vector<DType> floats = {DType::kF32, DType::kBF16, DType::kF16};
  for (int attempt = 0;; ++attempt) {
    Chain c;
    RandomChain rc;
    // Rows [R, W] (R static or the symbol "rows"), or [B, S, W] (S static or
    // the symbol "seq"): odd widths and row counts, a million elements at most.
    const int64_t w = Pick(rng, std::vector<int64_t>{1, 7, 33, 1000, 1001, 4099, 1024, 50257});
    std::vector<int64_t> row_counts;
    for (int64_t r : {1, 3, 7, 33, 257, 1027, 4099})
      if (r * w <= (int64_t{1} << 20)) row_counts.push_back(r);
    const bool three_d = Chance(rng, 0.25) && w <= 4099;
    const bool symbolic = Chance(rng, 0.4);
    std::vector<Dim> full;
    std::vector<int64_t> sizes;
    auto lead = [&](const char* name, int64_t size) {
      if (!symbolic) return Dim::Static(size);
      // The hint is the size, or none (the heuristic then assumes 2^20).
      c.symbols.push_back(SymbolInfo{name, Chance(rng, 0.5) ? size : 0, 0});
      rc.symbol_values.push_back(size);
      return Dim::Sym(0);
    };
    if (three_d) {
      const int64_t b = Pick(rng, std::vector<int64_t>{2, 3, 5});
      std::vector<int64_t> seqs;
      for (int64_t s : {1, 7, 37, 129})
        if (b * s * w <= (int64_t{1} << 20)) seqs.push_back(s);
      const int64_t s = Pick(rng, seqs);
      full = {Dim::Static(b), lead("seq", s), Dim::Static(w)};
      sizes = std::vector<int64_t>{b, s, w};
    } else {
      const int64_t r = Pick(rng, row_counts);
      full = {lead("rows", r), Dim::Static(w)};
      sizes = std::vector<int64_t>{r, w};
    }
    const DType t = Pick(rng, floats);
    std::vector<Dim> per_row = full;
    per_row.back() = Dim::Static(1);
    // Inputs: x of the rows in `t`, then up to three of another full input
    // (any float dtype), a weight [W], a per-row value, a bool mask.
    std::vector<TensorType> inputs = {TensorType{t, full}};
    const int extra = std::uniform_int_distribution<int>(0, 3)(rng);
    for (int i = 0; i < extra; ++i) {
      switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
        case 0:
          inputs.push_back(TensorType{Pick(rng, floats), full});
          break;
        case 1:
          inputs.push_back(TensorType{t, {full.back()}});
          break;
        case 2:
          inputs.push_back(TensorType{t, per_row});
          break;
        default:
          inputs.push_back(TensorType{DType::kBool, full});
      }
    }
    internal::Builder elementwise(c, rng);
    std::string desc;
    for (const TensorType& in : inputs) {
      elementwise.AddInput(in);
      std::string dims;
      for (size_t a = 0; a < in.shape.size(); ++a) {
        const Dim& d = in.shape[a];
        absl::StrAppend(&dims, a ? "," : "",
                        d.is_static() ? absl::StrCat(d.size)
                                      : absl::StrCat(c.symbols[0].name, "=", rc.symbol_values[0]));
      }
      absl::StrAppend(&desc, desc.empty() ? "" : " ", std::string(DTypeName(in.dtype)), "[", dims,
                      "]");
    }
    const int before = std::uniform_int_distribution<int>(0, 4)(rng);
    for (int i = 0, tries = 0; i < before && tries < 30; ++tries) i += elementwise.Step() ? 1 : 0;

    reduce_internal::ReduceBuilder b(c, rng, full, sizes);
    b.TakeElementwise(elementwise.values());
    const int moves = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0, tries = 0; i < moves && tries < 30; ++tries) i += b.Step() ? 1 : 0;
    const int after = std::uniform_int_distribution<int>(0, 2)(rng);
    for (int i = 0, tries = 0; i < after && tries < 30; ++tries) i += b.Mix() ? 1 : 0;
    if (b.reduced().empty()) continue;

    // Outputs: the last writable term, the last result of a reduction
    // move, and up to two more writable computed terms.
    const std::vector<reduce_internal::Term>& terms = b.terms();
    auto add_output = [&](const reduce_internal::Term& term) {
      if (!term.output_ok || c.nodes[term.node].kind == OpKind::kInput) return;
      if (std::find(c.outputs.begin(), c.outputs.end(), term.node) == c.outputs.end())
        c.outputs.push_back(term.node);
    };
    for (size_t i = terms.size(); i-- > 0;) {
      if (terms[i].output_ok && c.nodes[terms[i].node].kind != OpKind::kInput) {
        add_output(terms[i]);
        break;
      }
    }
    add_output(terms[b.reduced().back()]);
    const int more = std::uniform_int_distribution<int>(0, 2)(rng);
    for (int i = 0; i < more; ++i) add_output(Pick(rng, terms));
    if (c.outputs.empty()) continue;
    for (size_t j = 0; j < c.outputs.size(); ++j) c.output_names.push_back(absl::StrCat("out", j));
    absl::StatusOr<Chain> v = Validate(c);
    if (!v.ok()) {
      // The generator should keep to valid chains; say which one it missed.
      std::fprintf(stderr, "random reduce chain %d attempt %d: %s\n%s\n", index, attempt,
                   v.status().ToString().c_str(), ToString(c).c_str());
      KFUSE_CHECK(attempt < 20);
      continue;
    }
    rc.chain = reduce_test::Finish(std::move(c));
    int ops = 0, reductions = 0;
    for (const Node& n : rc.chain.nodes) {
      ops += n.kind != OpKind::kInput;
      reductions += IsReduction(n.kind);
    }
    rc.name = absl::StrCat(index, ": ", desc, " -> ", rc.chain.outputs.size(), " out, ", ops,
                           " ops, ", reductions, " reductions");
    return rc;
  }
}

}  // namespace kfuse::testing_chains

#endif  // KFUSE_TESTS_RANDOM_REDUCE_CHAINS_H_
