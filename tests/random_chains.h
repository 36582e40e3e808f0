// A seeded generator of random, valid element-wise chains for property tests:
// every dtype, odd sizes, broadcasting, symbolic sizes, several outputs.
// Chains from index kFirstViewChain on also take layout views (rolls and
// deinterleaves made of slices and concats, transposes of computed values,
// reshapes that split a dim and merge it back, expands); the chains before
// it are what they always were.
// Chains are built so that a correct fused kernel stays within eager
// PyTorch's error of the fp64 reference: discontinuous ops (comparisons,
// float-to-int casts, floor) apply only to inputs, which are exact, and
// magnitudes are tracked so that nothing overflows f16.
//
//   RandomChain rc = MakeRandomChain(seed);   // rc.chain is validated
//   std::vector<std::vector<double>> in = RandomInputs(rc, seed);
#ifndef KFUSE_TESTS_RANDOM_CHAINS_H_
#define KFUSE_TESTS_RANDOM_CHAINS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/analysis.h"
#include "codegen/ir.h"
#include "codegen/numeric.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse::testing_chains {

// The first chain index whose chains take layout views.
inline constexpr int kFirstViewChain = 25;

struct RandomChain {
  std::string name;  // "7: f16[1000003],bf16[1000003] -> 2 outputs".
  Chain chain;       // Validated.
  std::vector<int64_t> symbol_values;
};

namespace internal {

struct Value {
  int32_t node;
  DType dtype;
  double bound;  // |value| <= bound (roughly).
  bool is_input;
};

inline bool Chance(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}
template <typename T>
const T& Pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

// The shape `a` and `b` broadcast to (right-aligned; a 1 takes the other's dim).
inline std::vector<Dim> Broadcast(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  std::vector<Dim> r(std::max(a.size(), b.size()), Dim::Static(1));
  for (size_t i = 0; i < r.size(); ++i) {
    const Dim* x = i < a.size() ? &a[a.size() - 1 - i] : nullptr;
    const Dim* y = i < b.size() ? &b[b.size() - 1 - i] : nullptr;
    Dim& out = r[r.size() - 1 - i];
    out = x == nullptr || *x == Dim::Static(1) ? (y ? *y : Dim::Static(1)) : *x;
  }
  return r;
}

class Builder {
 public:
  Builder(Chain& c, std::mt19937_64& rng, bool views = false)
      : c_(c), rng_(rng), views_(views) {}

  void AddInput(TensorType t) {
    int32_t id = c_.AddInput(t);
    values_.push_back(Value{id, t.dtype, t.dtype == DType::kBool ? 1.0 : 4.0, true});
    c_.input_names.push_back(absl::StrCat("in", id));
  }

  // One random op over the values so far; returns false when it found none
  // that keeps the chain well behaved.
  bool Step() {
    switch (std::uniform_int_distribution<int>(0, views_ ? 8 : 5)(rng_)) {
      case 0:
      case 1:
        return Unary();
      case 2:
      case 3:
        return Binary();
      case 4:
        return Where();
      case 6:
      case 7:
      case 8:
        return View();
      default:
        return CastOrCompare();
    }
  }

  const std::vector<Value>& values() const { return values_; }

 private:
  Value Push(int32_t node, DType t, double bound) {
    values_.push_back(Value{node, t, bound, false});
    return values_.back();
  }

  // Bool operands of arithmetic become i32 (PyTorch refuses bool sub/neg).
  Value Arith(Value v) {
    if (v.dtype != DType::kBool) return v;
    return Push(c_.AddCast(v.node, DType::kI32), DType::kI32, 1);
  }

  bool Unary() {
    Value v = Pick(rng_, values_);
    if (v.dtype == DType::kBool) {
      Push(c_.AddOp(OpKind::kLogicalNot, {v.node}), DType::kBool, 1);
      return true;
    }
    if (v.dtype == DType::kI32) {
      OpKind k = Chance(rng_, 0.5) ? OpKind::kNeg : OpKind::kAbs;
      Push(c_.AddOp(k, {v.node}), DType::kI32, v.bound);
      return true;
    }
    // Bounded results, safe anywhere.
    std::vector<std::pair<OpKind, double>> ops = {{OpKind::kTanh, 1},
                                                  {OpKind::kSigmoid, 1},
                                                  {OpKind::kSin, 1},
                                                  {OpKind::kCos, 1},
                                                  {OpKind::kErf, 1},
                                                  {OpKind::kNeg, v.bound},
                                                  {OpKind::kAbs, v.bound},
                                                  {OpKind::kRelu, v.bound},
                                                  {OpKind::kSilu, v.bound + 1},
                                                  {OpKind::kGeluTanh, v.bound + 1},
                                                  {OpKind::kGeluErf, v.bound + 1},
                                                  {OpKind::kSoftplus, v.bound + 1}};
    if (v.bound <= 8) ops.push_back({OpKind::kExp, std::exp(v.bound)});
    if (v.bound <= 100) ops.push_back({OpKind::kSquare, v.bound * v.bound});
    if (v.is_input) {  // Exact operands: domain-restricted and discontinuous ops.
      ops.push_back({OpKind::kLog, 2});
      ops.push_back({OpKind::kSqrt, 2});
      ops.push_back({OpKind::kRsqrt, 4});
      ops.push_back({OpKind::kFloor, v.bound + 1});
    }
    auto [kind, bound] = Pick(rng_, ops);
    Push(c_.AddOp(kind, {v.node}), v.dtype, bound);
    return true;
  }

  bool Binary() {
    Value a = Arith(Pick(rng_, values_)), b = Arith(Pick(rng_, values_));
    if (Chance(rng_, 0.2)) {  // A Python scalar operand.
      double k = Pick(rng_, std::vector<double>{0.5, 2.0, -1.5, 3.0, 0.125});
      int32_t cst = c_.AddConstant(a.dtype == DType::kI32 ? std::round(k) : k);
      b = Value{cst, a.dtype, std::abs(std::round(k)) + 1, true};
    }
    const bool ints = a.dtype == DType::kI32 && b.dtype == DType::kI32;
    std::vector<OpKind> ops = {OpKind::kAdd, OpKind::kSub, OpKind::kMaximum, OpKind::kMinimum};
    if (!ints && a.bound * b.bound <= 1e4) ops.push_back(OpKind::kMul);
    OpKind k = Pick(rng_, ops);
    double bound = k == OpKind::kMul                        ? a.bound * b.bound
                   : k == OpKind::kAdd || k == OpKind::kSub ? a.bound + b.bound
                                                            : std::max(a.bound, b.bound);
    DType t = Promote(a.dtype, b.dtype);
    if (bound > 3e4 && (t == DType::kF16 || t == DType::kI32)) return false;
    Push(c_.AddOp(k, {a.node, b.node}), t, bound);
    return true;
  }

  // where(cond, x, y) with cond exact: a bool input or a comparison of inputs.
  bool Where() {
    std::vector<Value> conds;
    for (const Value& v : values_)
      if (v.dtype == DType::kBool && v.is_input) conds.push_back(v);
    if (conds.empty()) return CastOrCompare();
    Value c = Pick(rng_, conds);
    Value x = Pick(rng_, values_), y = Pick(rng_, values_);
    if (x.dtype == DType::kBool || y.dtype == DType::kBool) return false;
    Push(c_.AddOp(OpKind::kWhere, {c.node, x.node, y.node}), Promote(x.dtype, y.dtype),
         std::max(x.bound, y.bound));
    return true;
  }

  bool CastOrCompare() {
    std::vector<Value> inputs;
    for (const Value& v : values_)
      if (v.is_input && c_.nodes[v.node].kind == OpKind::kInput) inputs.push_back(v);
    if (Chance(rng_, 0.5)) {
      Value a = Pick(rng_, inputs), b = Pick(rng_, inputs);
      OpKind k = Pick(rng_, std::vector<OpKind>{OpKind::kLt, OpKind::kGt, OpKind::kLe, OpKind::kGe,
                                                OpKind::kEq, OpKind::kNe});
      int32_t id = c_.AddOp(k, {a.node, b.node});
      // A comparison of exact values is exact: it may steer a where.
      values_.push_back(Value{id, DType::kBool, 1, true});
      return true;
    }
    // Casts: from exact inputs to anything; from computed floats to floats.
    Value v = Pick(rng_, values_);
    std::vector<DType> to = {DType::kF32, DType::kF16, DType::kBF16};
    if (v.is_input) {
      to.push_back(DType::kI32);
      to.push_back(DType::kBool);
    }
    DType t = Pick(rng_, to);
    if (t == DType::kF16 && v.bound > 3e4) return false;
    Push(c_.AddCast(v.node, t), t, t == DType::kBool ? 1 : v.bound + 1);
    return true;
  }

  // The shape of node `id` (views record theirs; element-wise ops broadcast
  // their operands').
  std::vector<Dim> Shape(int32_t id) {
    auto it = shapes_.find(id);
    if (it != shapes_.end()) return it->second;
    const Node& n = c_.nodes[id];
    std::vector<Dim> s;
    if (n.kind == OpKind::kInput) {
      s = n.type.shape;
    } else if (n.kind != OpKind::kConstant) {
      for (int32_t a : n.args) s = Broadcast(s, Shape(a));
    }
    shapes_[id] = s;
    return s;
  }

  int32_t Op(OpKind k, std::vector<int32_t> args, std::vector<Dim> shape) {
    int32_t id = c_.AddOp(k, std::move(args));
    shapes_[id] = std::move(shape);
    return id;
  }

  int32_t Slice(int32_t x, const std::vector<Dim>& shape, int64_t axis, int64_t start,
                int64_t step) {
    const int64_t size = shape[axis].size;
    std::vector<Dim> s = shape;
    s[axis] = Dim::Static(1 + (size - start - 1) / step);
    int32_t id = Op(OpKind::kSlice, {x}, s);
    c_.nodes[id].axis = axis;
    c_.nodes[id].start = start;
    c_.nodes[id].stop = size;
    c_.nodes[id].step = step;
    return id;
  }

  // A layout view of a random value that keeps it broadcastable with the
  // rest: a roll along a static axis (concat of two slices, the moved piece
  // sometimes negated), a deinterleave (even then odd elements), a
  // transpose, an element-wise op and the transpose back, a split of a dim
  // and its merge back, or an expand to a wider value's shape.
  bool View() {
    Value v = Pick(rng_, values_);
    const std::vector<Dim> shape = Shape(v.node);
    std::vector<int64_t> axes;  // Static axes of size >= 2.
    for (size_t a = 0; a < shape.size(); ++a) {
      if (shape[a].is_static() && shape[a].size >= 2) axes.push_back(static_cast<int64_t>(a));
    }
    // A kind that does not apply to v's shape hands over to the next one.
    const int first = std::uniform_int_distribution<int>(0, 4)(rng_);
    for (int k = 0; k < 5; ++k) {
      if (ViewOfKind((first + k) % 5, v, shape, axes)) return true;
    }
    return false;
  }

  bool ViewOfKind(int kind, const Value& v, const std::vector<Dim>& shape,
                  const std::vector<int64_t>& axes) {
    auto concat = [&](std::vector<int32_t> parts, int64_t axis) {
      int32_t id = Op(OpKind::kConcat, std::move(parts), shape);
      c_.nodes[id].axis = axis;
      return id;
    };
    switch (kind) {
      case 0: {  // Roll.
        if (axes.empty()) return false;
        const int64_t a = Pick(rng_, axes), size = shape[a].size;
        const int64_t h = std::uniform_int_distribution<int64_t>(1, size - 1)(rng_);
        int32_t moved = Slice(v.node, shape, a, h, 1);
        std::vector<Dim> head = shape;
        head[a] = Dim::Static(h);
        int32_t kept = Op(OpKind::kSlice, {v.node}, head);
        c_.nodes[kept].axis = a;
        c_.nodes[kept].stop = h;
        const bool negate = v.dtype != DType::kBool && Chance(rng_, 0.5);
        if (negate) {
          std::vector<Dim> ms = shape;
          ms[a] = Dim::Static(size - h);
          moved = Op(OpKind::kNeg, {moved}, ms);
        }
        Push(concat({moved, kept}, a), v.dtype, v.bound);
        values_.back().is_input = v.is_input && !negate;
        return true;
      }
      case 1: {  // Deinterleave.
        if (axes.empty()) return false;
        const int64_t a = Pick(rng_, axes);
        int32_t even = Slice(v.node, shape, a, 0, 2), odd = Slice(v.node, shape, a, 1, 2);
        Push(concat({even, odd}, a), v.dtype, v.bound);
        values_.back().is_input = v.is_input;
        return true;
      }
      case 2: {  // Transpose, op, transpose back.
        if (shape.size() != 2) return false;
        const std::vector<Dim> t = {shape[1], shape[0]};
        int32_t p = Op(OpKind::kPermute, {v.node}, t);
        c_.nodes[p].axes = {1, 0};
        int32_t f = Op(v.dtype == DType::kBool ? OpKind::kLogicalNot : OpKind::kAbs, {p}, t);
        int32_t back = Op(OpKind::kPermute, {f}, shape);
        c_.nodes[back].axes = {1, 0};
        Push(back, v.dtype, v.bound);
        return true;
      }
      case 3: {  // Split a dim by a small factor, then merge it back.
        for (int64_t a : axes) {
          for (int64_t f : {4, 3, 2, 5}) {
            if (shape[a].size % f != 0 || shape[a].size == f) continue;
            std::vector<Dim> split = shape;
            split[a] = Dim::Static(shape[a].size / f);
            split.insert(split.begin() + a, Dim::Static(f));
            int32_t r = Op(OpKind::kReshape, {v.node}, split);
            c_.nodes[r].shape = split;
            int32_t back = Op(OpKind::kReshape, {r}, shape);
            c_.nodes[back].shape = shape;
            Push(back, v.dtype, v.bound);
            values_.back().is_input = v.is_input;
            return true;
          }
        }
        return false;
      }
      default: {  // Expand to a wider value's shape.
        const std::vector<Dim> to = Broadcast(shape, Shape(Pick(rng_, values_).node));
        if (to == shape) return false;
        int32_t e = Op(OpKind::kExpand, {v.node}, to);
        c_.nodes[e].shape = to;
        Push(e, v.dtype, v.bound);
        values_.back().is_input = v.is_input;
        return true;
      }
    }
  }

  Chain& c_;
  std::mt19937_64& rng_;
  bool views_ = false;
  std::vector<Value> values_;
  std::map<int32_t, std::vector<Dim>> shapes_;
};

}  // namespace internal

// Chain `index` of the suite (0, 1, ...): deterministic in `index`.
inline RandomChain MakeRandomChain(int index) {
  using internal::Pick;
  std::mt19937_64 rng(0x6b667573ULL + static_cast<uint64_t>(index) * 7919);
  const std::vector<DType> dtypes = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                                     DType::kBool};
  const bool views = index >= kFirstViewChain;
  for (int attempt = 0;; ++attempt) {
    Chain c;
    RandomChain rc;
    internal::Builder b(c, rng, views);
    const int inputs = std::uniform_int_distribution<int>(1, 4)(rng);
    // Shapes: flat odd sizes, [N,1] x [1,M], [M] x [K,M], or a symbolic size.
    const int layout = index % 5;
    // Chains with views skip size 1, along which no view moves anything.
    const int64_t n = views ? Pick(rng, std::vector<int64_t>{7, 1000003, 4099, 65536, 96})
                            : Pick(rng, std::vector<int64_t>{1, 7, 1000003, 4099, 65536});
    const int64_t r = Pick(rng, std::vector<int64_t>{7, 33, 300});
    const int64_t m = views ? Pick(rng, std::vector<int64_t>{2, 13, 1000, 64})
                            : Pick(rng, std::vector<int64_t>{1, 13, 1000});
    std::vector<std::vector<Dim>> shapes;
    switch (layout) {
      case 0:
      case 1:
        shapes = {{Dim::Static(n)}};
        break;
      case 2:
        shapes = {{Dim::Static(r), Dim::Static(1)},
                  {Dim::Static(1), Dim::Static(m)},
                  {Dim::Static(r), Dim::Static(m)}};
        break;
      case 3:
        shapes = {{Dim::Static(m)}, {Dim::Static(r), Dim::Static(m)}};
        break;
      default:
        c.symbols.push_back(SymbolInfo{"n", 1 << 20, 0});
        rc.symbol_values = {n};
        shapes = {{Dim::Sym(0)}};
        break;
    }
    std::string desc;
    for (int i = 0; i < inputs; ++i) {
      TensorType t{Pick(rng, dtypes), shapes[i % shapes.size()]};
      b.AddInput(t);
      std::string dims;
      for (const Dim& d : t.shape)
        absl::StrAppend(&dims, dims.empty() ? "" : ",",
                        d.is_static() ? absl::StrCat(d.size) : absl::StrCat("n=", n));
      absl::StrAppend(&desc, i ? " " : "", std::string(DTypeName(t.dtype)), "[", dims, "]");
    }
    const int ops = std::uniform_int_distribution<int>(2, 8)(rng);
    for (int i = 0, tries = 0; i < ops && tries < 50; ++tries) i += b.Step() ? 1 : 0;
    // Outputs: the last value and up to two more computed ones.
    std::vector<int32_t> computed;
    for (const auto& v : b.values())
      if (c.nodes[v.node].kind != OpKind::kInput && c.nodes[v.node].kind != OpKind::kConstant)
        computed.push_back(v.node);
    if (computed.empty()) continue;
    c.outputs.push_back(computed.back());
    const int extra = std::uniform_int_distribution<int>(0, 2)(rng);
    for (int i = 0; i < extra && computed.size() > 1; ++i) {
      int32_t o = Pick(rng, computed);
      if (std::find(c.outputs.begin(), c.outputs.end(), o) == c.outputs.end())
        c.outputs.push_back(o);
    }
    for (size_t j = 0; j < c.outputs.size(); ++j) c.output_names.push_back(absl::StrCat("out", j));
    absl::StatusOr<Chain> v = Validate(c);
    if (!v.ok()) {
      // The generator should keep to valid chains; say which one it missed.
      std::fprintf(stderr, "random chain %d attempt %d: %s\n%s\n", index, attempt,
                   v.status().ToString().c_str(), ToString(c).c_str());
      KFUSE_CHECK(attempt < 20);
      continue;
    }
    rc.chain = *std::move(v);
    rc.name = absl::StrCat(index, ": ", desc, " -> ", c.outputs.size(), " out, ",
                           c.nodes.size() - inputs, " ops");
    return rc;
  }
}

// Random inputs in each input's domain (never all zeros), exact in its dtype.
inline std::vector<std::vector<double>> RandomInputs(const RandomChain& rc, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Domain> domains = InputDomains(rc.chain);
  std::vector<std::vector<double>> out;
  for (const Node& node : rc.chain.nodes) {
    if (node.kind != OpKind::kInput) continue;
    const int64_t n = static_cast<int64_t>(Elements(node.type, rc.symbol_values));
    const bool positive = domains[node.input_index] == Domain::kPositive;
    std::vector<double> v(n);
    for (double& x : v) {
      switch (node.type.dtype) {
        case DType::kBool:
          x = internal::Chance(rng, 0.5);
          break;
        case DType::kI32:
          x = std::uniform_int_distribution<int>(positive ? 1 : -100, 100)(rng);
          break;
        default:
          x = positive ? std::uniform_real_distribution<double>(0.1, 4)(rng)
                       : std::uniform_real_distribution<double>(-4, 4)(rng);
          x = RoundTo(node.type.dtype, x);
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace kfuse::testing_chains

#endif  // KFUSE_TESTS_RANDOM_CHAINS_H_
