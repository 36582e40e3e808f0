// Runs a pointwise group's index program on the CPU, as its kernel indexes
// memory, for tests: every read at its strides, offset and guard, every
// concat choice, every store. Test-only.
//
//   auto got = views_test::RunOnCpu(chain, group, inputs, symbol_values);
//   EXPECT_EQ(*got, *Evaluate(chain, inputs, symbol_values, EvalMode::kExact64));
#ifndef KFUSE_CODEGEN_POINTWISE_VIEWS_TEST_UTIL_H_
#define KFUSE_CODEGEN_POINTWISE_VIEWS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codegen/ir.h"
#include "codegen/numeric.h"
#include "codegen/partition.h"
#include "codegen/pointwise_layout.h"
#include "codegen/scalar_eval.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse::views_test {

inline int64_t Value(const Mono& m, const std::vector<int64_t>& syms) {
  int64_t v = m.coef;
  for (int32_t s : m.syms) v *= syms[s];
  return v;
}

inline int64_t Index(const std::vector<Mono>& strides, const Poly& offset,
                     const std::vector<int64_t>& coords, const std::vector<int64_t>& syms) {
  int64_t i = 0;
  for (const Mono& m : offset) i += Value(m, syms);
  for (size_t d = 0; d < strides.size(); ++d) i += coords[d] * Value(strides[d], syms);
  return i;
}

// Runs `group`'s iteration space on the CPU as the generated kernel indexes
// it: coordinates of each element over the collapsed sizes, concat conds,
// guarded reads (a read whose guard holds must be in bounds; one whose
// guard fails is not made), terms, stores. Inputs are logical (dense
// row-major); a strided input is laid out at its strides first.
inline absl::StatusOr<std::vector<std::vector<double>>> RunOnCpu(
    const Chain& c, const KernelGroup& group, const std::vector<std::vector<double>>& inputs,
    const std::vector<int64_t>& syms) {
  KFUSE_ASSIGN_OR_RETURN(IterSpace s, BuildIterSpace(c, group));
  auto numel = [&](const TensorType& t) {
    int64_t n = 1;
    for (const Dim& d : t.shape) n *= d.is_static() ? d.size : syms[d.symbol];
    return n;
  };
  std::vector<std::vector<double>> mem(c.num_inputs());
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    const std::vector<double>& in = inputs[n.input_index];
    std::vector<double>& m = mem[n.input_index];
    if (n.strides.empty()) {
      for (double v : in) m.push_back(RoundTo(n.type.dtype, v));
      continue;
    }
    std::vector<int64_t> dims;
    int64_t size = 1;
    for (size_t d = 0; d < n.strides.size(); ++d) {
      dims.push_back(n.type.shape[d].is_static() ? n.type.shape[d].size
                                                 : syms[n.type.shape[d].symbol]);
      size += (dims.back() - 1) * n.strides[d];
    }
    m.assign(size, std::nan(""));
    for (int64_t flat = 0; flat < static_cast<int64_t>(in.size()); ++flat) {
      int64_t r = flat, at = 0;
      for (size_t d = dims.size(); d-- > 0;) {
        at += (r % dims[d]) * n.strides[d];
        r /= dims[d];
      }
      m[at] = RoundTo(n.type.dtype, in[flat]);
    }
  }
  std::vector<std::vector<double>> out(c.outputs.size());
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    out[j].assign(numel(c.nodes[c.outputs[j]].type), std::nan("1"));
  }
  const int64_t total = Value(s.numel, syms);
  std::vector<int64_t> coords(s.sizes.size());
  std::vector<double> v(s.terms.size());
  for (int64_t e = 0; e < total; ++e) {
    for (size_t d = s.sizes.size(), r = e; d-- > 0;) {
      const int64_t size = Value(s.sizes[d], syms);
      coords[d] = static_cast<int64_t>(r) % size;
      r /= size;
    }
    std::vector<bool> holds;
    for (const Cond& k : s.conds) {
      const int64_t x = Index(k.strides, k.offset, coords, syms);
      holds.push_back((!k.has_lo || x >= k.lo) && (!k.has_hi || x < k.hi));
    }
    for (size_t i = 0; i < s.terms.size(); ++i) {
      const Term& t = s.terms[i];
      std::vector<double> args;
      for (int32_t a : t.args) args.push_back(v[a]);
      if (t.kind == Term::Kind::kLoad) {
        const Operand& o = s.inputs[t.operand];
        bool read = true;
        for (int32_t g : o.guard) read = read && holds[g];
        v[i] = 0;
        if (!read) continue;
        KFUSE_CHECK(o.buffer.kind == BufferRef::Kind::kInput);
        const std::vector<double>& m = mem[o.buffer.index];
        const int64_t at = Index(o.strides, o.offset, coords, syms);
        if (at < 0 || at >= static_cast<int64_t>(m.size())) {
          return absl::InternalError(
              absl::StrCat("element ", e, ": input ", o.buffer.index, " read at ", at));
        }
        v[i] = m[at];
      } else if (t.kind == Term::Kind::kSelect) {
        size_t j = 0;
        while (j < t.conds.size() && !holds[t.conds[j]]) ++j;
        v[i] = args[j];
      } else if (c.nodes[t.node].kind == OpKind::kConstant) {
        v[i] = c.nodes[t.node].value;
      } else {
        v[i] = EvalScalar(c.nodes[t.node], ComputeDType(c, t.node), args, /*eager=*/false);
      }
    }
    for (size_t m = 0; m < s.outputs.size(); ++m) {
      const Operand& o = s.outputs[m];
      KFUSE_CHECK(o.buffer.kind == BufferRef::Kind::kOutput);
      std::vector<double>& dst = out[o.buffer.index];
      const int64_t at = Index(o.strides, o.offset, coords, syms);
      if (at < 0 || at >= static_cast<int64_t>(dst.size())) {
        return absl::InternalError(absl::StrCat("element ", e, ": output write at ", at));
      }
      dst[at] = v[s.results[m]];
    }
  }
  return out;
}

}  // namespace kfuse::views_test

#endif  // KFUSE_CODEGEN_POINTWISE_VIEWS_TEST_UTIL_H_
