// Normalisation chains for the row family's tests (CPU, golden, NVRTC and
// GPU), built from element-wise ops and reductions as a client would send
// them: softmax, log_softmax, LayerNorm, RMSNorm with a residual add.
//
//   Chain c = row_test::Softmax(DType::kBF16, 8, 4096);   // validated, canonical
#ifndef KFUSE_CODEGEN_ROW_TEST_CHAINS_H_
#define KFUSE_CODEGEN_ROW_TEST_CHAINS_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/canonicalize.h"
#include "codegen/ir.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse::row_test {

// rows < 0: a symbol "rows" with hint -rows.
inline Dim Rows(Chain* c, int64_t rows) {
  if (rows >= 0) return Dim::Static(rows);
  c->symbols.push_back(SymbolInfo{"rows", -rows, 0});
  return Dim::Sym(static_cast<int32_t>(c->symbols.size() - 1));
}

inline int32_t Reduce(Chain* c, OpKind k, int32_t x, int64_t axis, bool keepdim = true) {
  int32_t r = c->AddOp(k, {x});
  c->nodes[r].axes = {axis};
  c->nodes[r].keepdim = keepdim;
  return r;
}

inline Chain Finish(Chain c) {
  for (size_t i = 0, w = 0; i < c.nodes.size(); ++i) {
    if (c.nodes[i].kind != OpKind::kInput) c.nodes[i].wire_index = static_cast<int32_t>(w++);
  }
  absl::StatusOr<Chain> v = Validate(std::move(c));
  KFUSE_CHECK(v.ok());
  return Canonicalize(*v);
}

// softmax(x) over the last axis; masked: where(mask, x, -inf) first, with a
// bool mask [1, W] (mask_rows 1) or [R, W].
inline Chain Softmax(DType t, int64_t rows, int64_t width, bool masked = false,
                     bool mask_per_row = true, bool log = false) {
  Chain c;
  Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
  if (masked) {
    int32_t m = c.AddInput(
        TensorType{DType::kBool, {mask_per_row ? r : Dim::Static(1), Dim::Static(width)}});
    x = c.AddOp(OpKind::kWhere, {m, x, c.AddConstant(-HUGE_VAL)});
  }
  int32_t mx = Reduce(&c, OpKind::kReduceMax, x, 1);
  int32_t d = c.AddOp(OpKind::kSub, {x, mx});
  int32_t e = c.AddOp(OpKind::kExp, {d});
  int32_t s = Reduce(&c, OpKind::kReduceSum, e, 1);
  if (log) {
    c.outputs = {c.AddOp(OpKind::kSub, {d, c.AddOp(OpKind::kLog, {s})})};
  } else {
    c.outputs = {c.AddOp(OpKind::kDiv, {e, s})};
  }
  return Finish(std::move(c));
}

// softmax(v) over the last axis where v = x, then 20 times v = tanh(sin(v) +
// x) * 4: the element functions past 64 ops and the sins are called out of
// line. Each step adds x back, so the row keeps the spread of its inputs (a
// chain that converged to one value would make a near-uniform row, whose
// 50257 comparable terms the looped f32 sums add less exactly than eager).
inline Chain LongChainSoftmax(DType t, int64_t rows, int64_t width) {
  Chain c;
  Dim r = Rows(&c, rows);
  const int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
  const int32_t k = c.AddConstant(4.0);
  int32_t v = x;
  for (int i = 0; i < 20; ++i) {
    v = c.AddOp(OpKind::kMul,
                {c.AddOp(OpKind::kTanh, {c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kSin, {v}), x})}), k});
  }
  int32_t mx = Reduce(&c, OpKind::kReduceMax, v, 1);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {v, mx})});
  c.outputs = {c.AddOp(OpKind::kDiv, {e, Reduce(&c, OpKind::kReduceSum, e, 1)})};
  return Finish(std::move(c));
}

// softmax(x * 2^-21) over the last axis: a near-uniform row (exp terms
// within 2^-18 of 1, as logits near zero make). Once a thread's f32 sum
// passes a few hundred, every term rounds the same way, so an uncompensated
// sum of 400 terms a lane is 20-30 units of 2^-24 off (a CPU model of the
// kernels' orders) where eager's is within one.
inline Chain NearUniformSoftmax(DType t, int64_t rows, int64_t width) {
  Chain c;
  Dim r = Rows(&c, rows);
  const int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
  const int32_t v = c.AddOp(OpKind::kMul, {x, c.AddConstant(0x1p-21)});
  int32_t mx = Reduce(&c, OpKind::kReduceMax, v, 1);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {v, mx})});
  c.outputs = {c.AddOp(OpKind::kDiv, {e, Reduce(&c, OpKind::kReduceSum, e, 1)})};
  return Finish(std::move(c));
}

// LayerNorm over the last axis with weight and bias [W], eps 2^-17.
inline Chain LayerNorm(DType t, int64_t rows, int64_t width) {
  Chain c;
  Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
  int32_t w = c.AddInput(TensorType{t, {Dim::Static(width)}});
  int32_t b = c.AddInput(TensorType{t, {Dim::Static(width)}});
  int32_t mean = Reduce(&c, OpKind::kReduceMean, x, 1);
  int32_t d = c.AddOp(OpKind::kSub, {x, mean});
  int32_t var = Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {d, d}), 1);
  int32_t inv = c.AddOp(OpKind::kRsqrt, {c.AddOp(OpKind::kAdd, {var, c.AddConstant(0x1p-17)})});
  int32_t y = c.AddOp(OpKind::kMul, {d, inv});
  c.outputs = {c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {y, w}), b})};
  return Finish(std::move(c));
}

// h = x + residual; outputs h and rmsnorm(h) * w (eps 2^-20); with_rstd adds
// the per-row rsqrt as a third output [R] (a reduction without keepdim).
inline Chain RmsNormResidual(DType t, int64_t rows, int64_t width, bool residual = true) {
  Chain c;
  Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
  int32_t w = c.AddInput(TensorType{t, {Dim::Static(width)}});
  int32_t h = x;
  if (residual) {
    int32_t res = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
    h = c.AddOp(OpKind::kAdd, {x, res});
  }
  int32_t ms = Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {h, h}), 1);
  int32_t inv = c.AddOp(OpKind::kRsqrt, {c.AddOp(OpKind::kAdd, {ms, c.AddConstant(0x1p-20)})});
  int32_t y = c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kMul, {h, inv}), w});
  c.outputs = residual ? std::vector<int32_t>{h, y} : std::vector<int32_t>{y};
  return Finish(std::move(c));
}

// e = exp(x); outputs e / e.sum(-1, keepdim) and its keepdim-less twin
// e.sum(-1) [R]: one sum used in the row and written too.
inline Chain SumNormalized(DType t, int64_t rows, int64_t width) {
  Chain c;
  Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
  int32_t e = c.AddOp(OpKind::kExp, {x});
  c.outputs = {c.AddOp(OpKind::kDiv, {e, Reduce(&c, OpKind::kReduceSum, e, 1, true)}),
               Reduce(&c, OpKind::kReduceSum, e, 1, false)};
  return Finish(std::move(c));
}

// The per-row sum [R] of x * 2^29, x an i32 [R, W]: the products reach
// +-2^31 for |x| up to 4 (the test inputs'), so the sums wrap.
inline Chain IntRowSum(int64_t rows, int64_t width) {
  Chain c;
  Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{DType::kI32, {r, Dim::Static(width)}});
  int32_t big = c.AddOp(OpKind::kMul, {x, c.AddConstant(0x1p29)});
  c.outputs = {Reduce(&c, OpKind::kReduceSum, big, 1, false)};
  return Finish(std::move(c));
}

// Per-row statistics without keepdim: max [R] and sum [R] of x [R, W].
inline Chain RowStats(DType t, int64_t rows, int64_t width) {
  Chain c;
  Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(width)}});
  c.outputs = {Reduce(&c, OpKind::kReduceMax, x, 1, false),
               Reduce(&c, OpKind::kReduceSum, x, 1, false)};
  return Finish(std::move(c));
}

// `c` with chain input `input` laid out at `strides` (elements), as a
// client passes a slice or a transpose of a larger tensor.
inline Chain Strided(Chain c, int32_t input, std::vector<int64_t> strides) {
  for (Node& n : c.nodes) {
    if (n.kind == OpKind::kInput && n.input_index == input) n.strides = strides;
  }
  return c;
}

// softmax over the last axis of x [B, S, W] whose rows lie `pitch` apart
// and whose S rows of a batch `batch_pitch` apart (a padded tensor's
// slice): a row kernel's three row coordinates at strides of their own.
inline Chain PaddedSoftmax3D(DType t, int64_t b, int64_t s, int64_t width, int64_t pitch,
                             int64_t batch_pitch) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Dim::Static(b), Dim::Static(s), Dim::Static(width)}},
                         {batch_pitch, pitch, 1});
  int32_t mx = Reduce(&c, OpKind::kReduceMax, x, 2);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {x, mx})});
  c.outputs = {c.AddOp(OpKind::kDiv, {e, Reduce(&c, OpKind::kReduceSum, e, 2)})};
  return Finish(std::move(c));
}

// RMSNorm (weight [W], eps 2^-20) of x[..., start:start + W] (the last axis
// sliced at step `step`), x [R, total] (rows < 0: symbolic): one of a fused
// projection's parts normalised (a QK norm), or a padded row.
inline Chain SlicedRmsNorm(DType t, int64_t rows, int64_t total, int64_t start, int64_t width,
                           int64_t step = 1) {
  Chain c;
  Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(total)}});
  int32_t w = c.AddInput(TensorType{t, {Dim::Static(width)}});
  int32_t s = c.AddOp(OpKind::kSlice, {x});
  c.nodes[s].axis = 1;
  c.nodes[s].start = start;
  c.nodes[s].stop = start + width * step;
  c.nodes[s].step = step;
  int32_t ms = Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {s, s}), 1);
  int32_t inv = c.AddOp(OpKind::kRsqrt, {c.AddOp(OpKind::kAdd, {ms, c.AddConstant(0x1p-20)})});
  c.outputs = {c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kMul, {s, inv}), w})};
  return Finish(std::move(c));
}

}  // namespace kfuse::row_test

#endif  // KFUSE_CODEGEN_ROW_TEST_CHAINS_H_
