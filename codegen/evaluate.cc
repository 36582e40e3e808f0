#include "codegen/evaluate.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/scalar_eval.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 28;

using Dims = std::vector<int64_t>;
using Values = std::vector<double>;

int64_t Product(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Element strides of `in` read at the indices of `out` (numpy broadcasting:
// missing and size-1 dims get stride 0).
Dims BroadcastStrides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    size_t o = out.size() - in.size() + i;
    s[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return s;
}

// Calls f(index) for every multi-index of `dims`, row-major.
void ForEachIndex(const Dims& dims, const std::function<void(const Dims&)>& f) {
  int64_t total = Product(dims);
  Dims idx(dims.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    f(idx);
    for (size_t k = dims.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) break;
      idx[k] = 0;
    }
  }
}

int64_t Dot(const Dims& idx, const Dims& strides) {
  int64_t o = 0;
  for (size_t k = 0; k < idx.size(); ++k) o += idx[k] * strides[k];
  return o;
}

class Evaluator {
 public:
  Evaluator(const Chain& c, absl::Span<const int64_t> symbols, bool eager)
      : c_(c), symbols_(symbols), eager_(eager), values_(c.nodes.size()) {}

  Dims Shape(int32_t id) const {
    Dims d;
    for (const Dim& x : c_.nodes[id].type.shape) {
      d.push_back(x.is_static() ? x.size : symbols_[x.symbol]);
    }
    return d;
  }

  absl::Status Run(const std::vector<Values>& inputs, const std::vector<bool>& live) {
    for (int32_t id = 0; id < static_cast<int32_t>(c_.nodes.size()); ++id) {
      if (!live[id]) continue;
      int64_t n = Product(Shape(id));
      if (n > kMaxElements) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node ", id, " has ", n, " elements; the evaluator takes at most ", kMaxElements));
      }
      const Node& node = c_.nodes[id];
      if (node.kind == OpKind::kInput) {
        const Values& in = inputs[node.input_index];
        if (static_cast<int64_t>(in.size()) != n) {
          return absl::InvalidArgumentError(absl::StrCat(
              "inputs[", node.input_index, "]: ", in.size(), " values for ", n, " elements"));
        }
        values_[id].resize(n);
        for (int64_t i = 0; i < n; ++i) values_[id][i] = RoundTo(node.type.dtype, in[i]);
      } else if (node.kind == OpKind::kConstant) {
        values_[id] = {node.value};
      } else if (IsElementwise(node.kind)) {
        Elementwise(id);
      } else if (IsReduction(node.kind)) {
        Reduce(id);
      } else if (node.kind == OpKind::kMatmul) {
        Matmul(id);
      } else {
        Layout(id);
      }
    }
    return absl::OkStatus();
  }

  const Values& value(int32_t id) const { return values_[id]; }

 private:
  double Store(DType t, double v) const { return eager_ || !IsFloat(t) ? RoundTo(t, v) : v; }

  void Elementwise(int32_t id) {
    const Node& n = c_.nodes[id];
    Dims out = Shape(id);
    std::vector<Dims> strides;
    for (int32_t a : n.args) strides.push_back(BroadcastStrides(Shape(a), out));
    DType compute = ComputeDType(c_, id);
    Values& r = values_[id];
    r.reserve(Product(out));
    std::vector<double> args(n.args.size());
    ForEachIndex(out, [&](const Dims& idx) {
      for (size_t i = 0; i < args.size(); ++i) args[i] = values_[n.args[i]][Dot(idx, strides[i])];
      r.push_back(EvalScalar(n, compute, args, eager_));
    });
  }

  void Reduce(int32_t id) {
    const Node& n = c_.nodes[id];
    Dims in = Shape(n.args[0]);
    // The output element of each input index: reduced dims contribute 0.
    Dims kept(in.size(), 1);
    for (int64_t a : n.axes) kept[a] = 0;
    Dims out_dims;
    for (size_t k = 0; k < in.size(); ++k) out_dims.push_back(kept[k] ? in[k] : 1);
    Dims out_strides = BroadcastStrides(out_dims, out_dims);
    for (size_t k = 0; k < in.size(); ++k) {
      if (!kept[k]) out_strides[k] = 0;
    }
    int64_t m = Product(out_dims);
    double count = static_cast<double>(Product(in) / std::max<int64_t>(m, 1));
    bool is_max = n.kind == OpKind::kReduceMax, is_min = n.kind == OpKind::kReduceMin;
    double init = is_max ? -HUGE_VAL : is_min ? HUGE_VAL : 0;
    Values acc(m, init);
    const Values& x = values_[n.args[0]];
    // i64 sums add exactly and wrap at 64 bits, as the kernels' do (a
    // double would round past 2^53 at every step).
    const bool wide = n.kind == OpKind::kReduceSum && n.type.dtype == DType::kI64;
    std::vector<uint64_t> wide_acc(wide ? m : 0, 0);
    int64_t flat = 0;
    ForEachIndex(in, [&](const Dims& idx) {
      double v = x[flat++];
      double& a = acc[Dot(idx, out_strides)];
      if (wide) {
        wide_acc[Dot(idx, out_strides)] += static_cast<uint64_t>(static_cast<int64_t>(v));
      } else if (is_max || is_min) {
        if (std::isnan(v) || std::isnan(a)) {
          a = std::numeric_limits<double>::quiet_NaN();
        } else {
          a = is_max ? std::max(a, v) : std::min(a, v);
        }
      } else {
        a += v;
      }
    });
    for (int64_t i = 0; i < static_cast<int64_t>(wide_acc.size()); ++i) {
      acc[i] = static_cast<double>(static_cast<int64_t>(wide_acc[i]));
    }
    DType t = n.type.dtype;
    for (double& a : acc) {
      if (n.kind == OpKind::kReduceMean) a /= count;
      if (eager_ && IsFloat(t)) a = RoundTo(DType::kF32, a);
      if (t == DType::kI32) a = WrapI32(static_cast<int64_t>(a));
      a = Store(t, a);
    }
    values_[id] = std::move(acc);
  }

  void Matmul(int32_t id) {
    const Node& n = c_.nodes[id];
    Dims a = Shape(n.args[0]), b = Shape(n.args[1]), out = Shape(id);
    int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
    Dims batch(out.begin(), out.end() - 2);
    Dims a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
    Dims sa = BroadcastStrides(a_batch, batch), sb = BroadcastStrides(b_batch, batch);
    const Values &x = values_[n.args[0]], &y = values_[n.args[1]];
    Values& r = values_[id];
    ForEachIndex(batch, [&](const Dims& idx) {
      int64_t oa = Dot(idx, sa) * M * K, ob = Dot(idx, sb) * K * N;
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += x[oa + i * K + k] * y[ob + k * N + j];
          if (eager_) s = RoundTo(DType::kF32, s);
          r.push_back(Store(n.type.dtype, s));
        }
      }
    });
  }

  void Layout(int32_t id) {
    const Node& n = c_.nodes[id];
    Dims out = Shape(id);
    Values& r = values_[id];
    r.reserve(Product(out));
    if (n.kind == OpKind::kIota) {
      ForEachIndex(out, [&](const Dims& idx) {
        r.push_back(RoundTo(n.type.dtype, static_cast<double>(idx[n.axis])));
      });
      return;
    }
    const Values& x = values_[n.args[0]];
    Dims in = Shape(n.args[0]);
    Dims in_strides = BroadcastStrides(in, in);
    for (size_t k = 0; k < in.size(); ++k) {  // Dense strides, size-1 dims too.
      int64_t s = 1;
      for (size_t j = k + 1; j < in.size(); ++j) s *= in[j];
      in_strides[k] = s;
    }
    switch (n.kind) {
      case OpKind::kReshape:
        r = x;
        return;
      case OpKind::kExpand: {
        Dims s = BroadcastStrides(in, out);
        ForEachIndex(out, [&](const Dims& idx) { r.push_back(x[Dot(idx, s)]); });
        return;
      }
      case OpKind::kPermute: {
        Dims s(out.size());
        for (size_t k = 0; k < out.size(); ++k) s[k] = in_strides[n.axes[k]];
        ForEachIndex(out, [&](const Dims& idx) { r.push_back(x[Dot(idx, s)]); });
        return;
      }
      case OpKind::kSlice: {
        Dims s = in_strides;
        int64_t base = n.start * s[n.axis];
        s[n.axis] *= n.step;
        ForEachIndex(out, [&](const Dims& idx) { r.push_back(x[base + Dot(idx, s)]); });
        return;
      }
      case OpKind::kConcat: {
        // Walk the output; find the part each index along the axis falls in.
        std::vector<int64_t> offsets;
        int64_t off = 0;
        for (int32_t a : n.args) {
          offsets.push_back(off);
          off += Shape(a)[n.axis];
        }
        ForEachIndex(out, [&](const Dims& idx) {
          size_t part = offsets.size() - 1;
          while (offsets[part] > idx[n.axis]) --part;
          Dims local = idx;
          local[n.axis] -= offsets[part];
          Dims pd = Shape(n.args[part]);
          Dims ps(pd.size(), 1);
          for (size_t k = pd.size(); k-- > 1;) ps[k - 1] = ps[k] * pd[k];
          r.push_back(values_[n.args[part]][Dot(local, ps)]);
        });
        return;
      }
      default:
        KFUSE_CHECK(false);
    }
  }

  const Chain& c_;
  absl::Span<const int64_t> symbols_;
  bool eager_;
  std::vector<Values> values_;
};

}  // namespace

absl::StatusOr<std::vector<std::vector<double>>> Evaluate(
    const Chain& c, const std::vector<std::vector<double>>& inputs,
    absl::Span<const int64_t> symbol_values, EvalMode mode) {
  if (static_cast<int>(inputs.size()) != c.num_inputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluate: ", inputs.size(), " inputs given, the chain has ", c.num_inputs()));
  }
  if (symbol_values.size() < c.symbols.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "evaluate: ", symbol_values.size(), " symbol values for ", c.symbols.size(), " symbols"));
  }
  for (size_t s = 0; s < c.symbols.size(); ++s) {
    if (symbol_values[s] <= 0 || symbol_values[s] > kMaxElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("evaluate: symbol ", s, " = ", symbol_values[s], " is out of range"));
    }
  }
  std::vector<bool> live(c.nodes.size(), false);
  for (int32_t o : c.outputs) live[o] = true;
  for (size_t id = c.nodes.size(); id-- > 0;) {
    if (!live[id]) continue;
    for (int32_t a : c.nodes[id].args) live[a] = true;
  }
  for (size_t id = 0; id < c.nodes.size(); ++id) {
    live[id] = live[id] || c.nodes[id].kind == OpKind::kInput;  // Sizes are checked.
  }
  Evaluator e(c, symbol_values, mode == EvalMode::kEager);
  KFUSE_RETURN_IF_ERROR(e.Run(inputs, live));
  std::vector<std::vector<double>> out;
  for (int32_t o : c.outputs) out.push_back(e.value(o));
  return out;
}

}  // namespace kfuse
