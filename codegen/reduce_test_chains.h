// Chains that reduce over outer axes, for the reduction family's tests (CPU,
// golden, NVRTC and GPU), built as a client would send them: a column sum,
// centring by the column mean, softmax over axis 0, a [B, S, H] reduction
// over the sequence axis, a count of positive entries per column, and
// reductions along rows after or beside them.
//
//   Chain c = reduce_test::ColumnSoftmax(DType::kBF16, -4096, 1000);  // canonical
#ifndef KFUSE_CODEGEN_REDUCE_TEST_CHAINS_H_
#define KFUSE_CODEGEN_REDUCE_TEST_CHAINS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/canonicalize.h"
#include "codegen/ir.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse::reduce_test {

// size < 0: a symbol `name` with hint -size.
inline Dim Size(Chain* c, int64_t size, const char* name) {
  if (size >= 0) return Dim::Static(size);
  c->symbols.push_back(SymbolInfo{name, -size, 0});
  return Dim::Sym(static_cast<int32_t>(c->symbols.size() - 1));
}

inline int32_t Reduce(Chain* c, OpKind k, int32_t x, std::vector<int64_t> axes, bool keepdim) {
  int32_t r = c->AddOp(k, {x});
  c->nodes[r].axes = std::move(axes);
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

// sum(x, axis=0) of x [N, M]: [M].
inline Chain ColumnSum(DType t, int64_t n, int64_t m) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  c.outputs = {Reduce(&c, OpKind::kReduceSum, x, {0}, false)};
  return Finish(std::move(c));
}

// sum(v, axis=0) of x [N, M] where v = x, then 40 times v = tanh(sin(v) * 1.5):
// 80 element-wise ops before the reduction, so the reduce kernel calls its
// element work (kf_relem) and the accurate sins out of line.
inline Chain LongChainColumnSum(DType t, int64_t n, int64_t m) {
  Chain c;
  int32_t v = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  const int32_t k = c.AddConstant(1.5);
  for (int i = 0; i < 40; ++i) {
    v = c.AddOp(OpKind::kTanh, {c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSin, {v}), k})});
  }
  c.outputs = {Reduce(&c, OpKind::kReduceSum, v, {0}, false)};
  return Finish(std::move(c));
}

// x - mean(x, axis=0, keepdim=True) of x [N, M].
inline Chain CenterColumns(DType t, int64_t n, int64_t m) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  int32_t mean = Reduce(&c, OpKind::kReduceMean, x, {0}, true);
  c.outputs = {c.AddOp(OpKind::kSub, {x, mean})};
  return Finish(std::move(c));
}

// softmax(x, axis=0) of x [N, M]: max, exp(x - max), sum, divide.
inline Chain ColumnSoftmax(DType t, int64_t n, int64_t m) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  int32_t mx = Reduce(&c, OpKind::kReduceMax, x, {0}, true);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {x, mx})});
  int32_t s = Reduce(&c, OpKind::kReduceSum, e, {0}, true);
  c.outputs = {c.AddOp(OpKind::kDiv, {e, s})};
  return Finish(std::move(c));
}

// Of x [B, S, H] and w [H]: mean(x, axis=1) [B, H] and min(x * w, axes
// (0, 1)) [H], both without keepdim.
inline Chain SequenceStats(DType t, int64_t b, int64_t s, int64_t h) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Dim::Static(b), Size(&c, s, "s"), Dim::Static(h)}});
  int32_t w = c.AddInput(TensorType{t, {Dim::Static(h)}});
  int32_t mean = Reduce(&c, OpKind::kReduceMean, x, {1}, false);
  int32_t mn = Reduce(&c, OpKind::kReduceMin, c.AddOp(OpKind::kMul, {x, w}), {0, 1}, false);
  c.outputs = {mean, mn};
  return Finish(std::move(c));
}

// sum(x > 0, axis=0) of x [N, M] (an i32 count per column) and the column
// max beside it, keepdim.
inline Chain CountPositive(DType t, int64_t n, int64_t m) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  int32_t pos = c.AddOp(OpKind::kGt, {x, c.AddConstant(0)});
  c.outputs = {Reduce(&c, OpKind::kReduceSum, pos, {0}, true),
               Reduce(&c, OpKind::kReduceMax, x, {0}, true)};
  return Finish(std::move(c));
}

// Of x [N, M]: columns standardized (the column mean and the mean squared
// deviation over axis 0, keepdim; z = (x - mean) * rsqrt(var + 1e-5)), then
// a softmax along rows of z, and the row max beside it. Three kernels: the
// two column reductions, then a row kernel reading both.
inline Chain StandardizeThenRowSoftmax(DType t, int64_t n, int64_t m) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  int32_t mean = Reduce(&c, OpKind::kReduceMean, x, {0}, true);
  int32_t d = c.AddOp(OpKind::kSub, {x, mean});
  int32_t var = Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {d, d}), {0}, true);
  int32_t r = c.AddOp(OpKind::kRsqrt, {c.AddOp(OpKind::kAdd, {var, c.AddConstant(1e-5)})});
  int32_t z = c.AddOp(OpKind::kMul, {d, r});
  int32_t mx = Reduce(&c, OpKind::kReduceMax, z, {1}, true);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {z, mx})});
  int32_t s = Reduce(&c, OpKind::kReduceSum, e, {1}, true);
  c.outputs = {c.AddOp(OpKind::kDiv, {e, s}), mx};
  return Finish(std::move(c));
}

// Of `inputs` tensors [N, M]: their sum s centred by its column mean, then a
// softmax along rows of it. At the input limit (64), the row kernel reads
// every input and the column mean: more buffers than a client may send.
inline Chain ManyInputsThenRowSoftmax(DType t, int inputs, int64_t n, int64_t m) {
  Chain c;
  const Dim rows = Size(&c, n, "n");
  for (int i = 0; i < inputs; ++i) c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t s = 0;
  for (int i = 1; i < inputs; ++i) s = c.AddOp(OpKind::kAdd, {s, i});
  int32_t d = c.AddOp(OpKind::kSub, {s, Reduce(&c, OpKind::kReduceMean, s, {0}, true)});
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {d, Reduce(&c, OpKind::kReduceMax, d, {1}, true)})});
  c.outputs = {c.AddOp(OpKind::kDiv, {e, Reduce(&c, OpKind::kReduceSum, e, {1}, true)})};
  return Finish(std::move(c));
}

// Of x [N, M]: sum(x, axis=0) beside softmax(x, axis=1), which do not read
// each other: a reduction kernel and a row kernel.
inline Chain ColumnSumBesideRowSoftmax(DType t, int64_t n, int64_t m) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  int32_t mx = Reduce(&c, OpKind::kReduceMax, x, {1}, true);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {x, mx})});
  int32_t s = Reduce(&c, OpKind::kReduceSum, e, {1}, true);
  c.outputs = {Reduce(&c, OpKind::kReduceSum, x, {0}, false), c.AddOp(OpKind::kDiv, {e, s})};
  return Finish(std::move(c));
}

// Layout views beside reductions, of x [N, M] (plans whose views are
// computed by pointwise kernels):
//   0: softmax(x[:, 3:M-2]) along rows: the slice stored, then a row kernel;
//   1: softmax(x.t()) along rows and its row max: the transpose stored;
//   2: x.t() + x.sum(-1, keepdim) (N == M): the row sums stored, then a
//      pointwise kernel with the transpose;
//   3: softmax(x).t(): the softmax's max and sum stored, then a pointwise
//      kernel computing it transposed;
//   4: (x * its column index).sum(0): the product through the iota stored,
//      then the column sums;
//   5: (x * its row index).sum(-1): an iota along the outer axis, which a
//      row kernel does not count, so the product is stored, then the rows
//      summed;
//   6: (x - x.sum(-1, keepdim)).t().amax(-1), a view between two
//      reductions: the row sums stored, the transposed difference stored,
//      then its rows' max;
//   7: (x - x.amax(-1, keepdim)).t().sum(0): the same before a reduction
//      over the outer axis;
//   8: s = x.sum(-1); where(s != 0, s - s.reshape(N, 1), 0).sum(0): a
//      pointwise kernel reading the row sums directly and through a view;
//   9: s = x.sum(-1); s.sum(), o = x + s.reshape(N, 1) and o.sum(0): the
//      row kernel storing s writes o and stores it for its column sums.
//   10: m = x.amax(-1, keepdim) (an output), log(exp(x - m).sum(-1,
//      keepdim)).sum(0) and (x - m.expand(N, M)).sum(-1): the row kernel
//      storing the exp sums writes m and stores it for the view's kernel.
//   11: o = (x - x.amax(-1, keepdim)) * arange(M) (an output over the
//      rows, through an iota) and o.sum(0): the row kernel storing the row
//      max for o's column sums writes o, and stores it for them.
//   12: ((x - x.amax(-1, keepdim)) * w.reshape(N, 1)).sum(), w [N]: the
//      total split into row sums through a view and their sum over N; the
//      row kernel storing the row max for that sum stores the row sums too.
inline Chain ViewsBesideReductions(DType t, int64_t n, int64_t m, int which) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Size(&c, n, "n"), Dim::Static(m)}});
  auto transpose = [&](int32_t v) {
    int32_t p = c.AddOp(OpKind::kPermute, {v});
    c.nodes[p].axes = {1, 0};
    return p;
  };
  // softmax(v) along rows; its row max in *max.
  auto softmax = [&](int32_t v, int32_t* max) {
    *max = Reduce(&c, OpKind::kReduceMax, v, {1}, true);
    int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {v, *max})});
    return c.AddOp(OpKind::kDiv, {e, Reduce(&c, OpKind::kReduceSum, e, {1}, true)});
  };
  int32_t max = -1;
  switch (which) {
    case 0: {
      int32_t s = c.AddOp(OpKind::kSlice, {x});
      c.nodes[s].axis = 1;
      c.nodes[s].start = 3;
      c.nodes[s].stop = m - 2;
      c.outputs = {softmax(s, &max)};
      break;
    }
    case 1:
      c.outputs = {softmax(transpose(x), &max)};
      c.outputs.push_back(max);
      break;
    case 2: {
      int32_t sums = Reduce(&c, OpKind::kReduceSum, x, {1}, true);
      c.outputs = {c.AddOp(OpKind::kAdd, {transpose(x), sums})};
      break;
    }
    case 3:
      c.outputs = {transpose(softmax(x, &max))};
      break;
    case 6: {  // A view between two reductions: (x - x.sum(-1)).t().amax(-1).
      int32_t sums = Reduce(&c, OpKind::kReduceSum, x, {1}, true);
      c.outputs = {Reduce(&c, OpKind::kReduceMax, transpose(c.AddOp(OpKind::kSub, {x, sums})), {1}, false)};
      break;
    }
    case 7: {  // The same over the outer axis: (x - x.amax(-1)).t().sum(0).
      int32_t max = Reduce(&c, OpKind::kReduceMax, x, {1}, true);
      c.outputs = {Reduce(&c, OpKind::kReduceSum, transpose(c.AddOp(OpKind::kSub, {x, max})), {0}, false)};
      break;
    }
    case 8: {  // s = x.sum(-1); where(s != 0, s - s.reshape(N, 1), 0).sum(0).
      int32_t sums = Reduce(&c, OpKind::kReduceSum, x, {1}, false);
      int32_t column = c.AddOp(OpKind::kReshape, {sums});
      c.nodes[column].shape = {c.nodes[x].type.shape[0], Dim::Static(1)};
      int32_t kept = c.AddOp(OpKind::kWhere, {c.AddOp(OpKind::kNe, {sums, c.AddConstant(0)}),
                                              c.AddOp(OpKind::kSub, {sums, column}), c.AddConstant(0)});
      c.outputs = {Reduce(&c, OpKind::kReduceSum, kept, {0}, false)};
      break;
    }
    case 9: {  // s = x.sum(-1); s.sum(), o = x + s.reshape(N, 1), o.sum(0).
      int32_t sums = Reduce(&c, OpKind::kReduceSum, x, {1}, false);
      int32_t column = c.AddOp(OpKind::kReshape, {sums});
      c.nodes[column].shape = {c.nodes[x].type.shape[0], Dim::Static(1)};
      int32_t o = c.AddOp(OpKind::kAdd, {x, column});
      c.outputs = {Reduce(&c, OpKind::kReduceSum, sums, {0}, false), o, Reduce(&c, OpKind::kReduceSum, o, {0}, false)};
      break;
    }
    case 10: {  // m = x.amax(-1, keepdim); m, log(exp(x - m).sum(-1, keepdim)).sum(0), (x - m.expand(N, M)).sum(-1).
      int32_t m = Reduce(&c, OpKind::kReduceMax, x, {1}, true);
      int32_t sums = Reduce(&c, OpKind::kReduceSum, c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {x, m})}), {1}, true);
      int32_t column = c.AddOp(OpKind::kExpand, {m});
      c.nodes[column].shape = c.nodes[x].type.shape;
      c.outputs = {m, Reduce(&c, OpKind::kReduceSum, c.AddOp(OpKind::kLog, {sums}), {0}, false),
                   Reduce(&c, OpKind::kReduceSum, c.AddOp(OpKind::kSub, {x, column}), {1}, false)};
      break;
    }
    case 11: {
      int32_t index = c.AddOp(OpKind::kIota, {});
      c.nodes[index].shape = {Dim::Static(m)};
      c.nodes[index].dtype = DType::kI32;
      int32_t o = c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSub, {x, Reduce(&c, OpKind::kReduceMax, x, {1}, true)}),
                                         c.AddCast(index, t)});
      c.outputs = {o, Reduce(&c, OpKind::kReduceSum, o, {0}, false)};
      break;
    }
    case 12: {
      int32_t w = c.AddInput(TensorType{t, {c.nodes[x].type.shape[0]}});
      int32_t column = c.AddOp(OpKind::kReshape, {w});
      c.nodes[column].shape = {c.nodes[x].type.shape[0], Dim::Static(1)};
      int32_t d = c.AddOp(OpKind::kSub, {x, Reduce(&c, OpKind::kReduceMax, x, {1}, true)});
      c.outputs = {Reduce(&c, OpKind::kReduceSum, c.AddOp(OpKind::kMul, {d, column}), {0, 1}, true)};
      break;
    }
    default: {
      const bool rows = which == 5;
      int32_t index = c.AddOp(OpKind::kIota, {});
      c.nodes[index].shape = rows ? std::vector<Dim>{c.nodes[x].type.shape[0], Dim::Static(1)}
                                  : std::vector<Dim>{Dim::Static(m)};
      c.nodes[index].dtype = DType::kI32;
      int32_t w = c.AddOp(OpKind::kMul, {x, c.AddCast(index, t)});
      c.outputs = {Reduce(&c, OpKind::kReduceSum, w, {rows ? 1 : 0}, false)};
      break;
    }
  }
  return Finish(std::move(c));
}

// Of x [N, W] and z [N, V]: x.sum(-1) * exp(z - z.amax(-1, keepdim)).sum(-1),
// per-row values of two row shapes in one output ([N]), or, when `reduced`,
// that product's sum over N ([1]). Plain: the reductions of the shape that
// is not the output's last reduction's stored (z's, in canonical order),
// then a row kernel over the other's rows; reduced: a row kernel each,
// then the sum over N.
inline Chain TwoRowShapes(DType t, int64_t n, int64_t w, int64_t v, bool reduced) {
  Chain c;
  const Dim rows = Size(&c, n, "n");
  int32_t x = c.AddInput(TensorType{t, {rows, Dim::Static(w)}});
  int32_t z = c.AddInput(TensorType{t, {rows, Dim::Static(v)}});
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {z, Reduce(&c, OpKind::kReduceMax, z, {1}, true)})});
  int32_t both = c.AddOp(OpKind::kMul, {Reduce(&c, OpKind::kReduceSum, x, {1}, false),
                                        Reduce(&c, OpKind::kReduceSum, e, {1}, false)});
  c.outputs = {reduced ? Reduce(&c, OpKind::kReduceSum, both, {0}, true) : both};
  return Finish(std::move(c));
}

// Of x [B, R, W]: each row's min (keepdim or not) beside the sum and the
// min over every axis. One row kernel stores the row sums and the row minima
// for the reductions over the rest.
inline Chain RowMinBesideTotals(DType t, int64_t b, int64_t r, int64_t w, bool keepdim = false) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Dim::Static(b), Size(&c, r, "r"), Dim::Static(w)}});
  c.outputs = {Reduce(&c, OpKind::kReduceMin, x, {2}, keepdim), Reduce(&c, OpKind::kReduceSum, x, {0, 1, 2}, false),
               Reduce(&c, OpKind::kReduceMin, x, {0, 1, 2}, false)};
  return Finish(std::move(c));
}

// Of x [N, M] and y [N, 1] (or [1, M] when `nest`): exp(sum(x, axis=0)) [M]
// beside relu(y). [M] and [N, 1] do not nest: a pointwise kernel each after
// the reduction kernel; [M] and [1, M] share one.
inline Chain ColumnSumsBesideScale(DType t, int64_t n, int64_t m, bool nest = false) {
  Chain c;
  const Dim rows = Size(&c, n, "n");
  int32_t x = c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t y = c.AddInput(TensorType{t, {nest ? Dim::Static(1) : rows, Dim::Static(nest ? m : 1)}});
  c.outputs = {c.AddOp(OpKind::kExp, {Reduce(&c, OpKind::kReduceSum, x, {0}, false)}),
               c.AddOp(OpKind::kRelu, {y})};
  return Finish(std::move(c));
}

// Of x [B, S, H]: each token's root mean square over H (keepdim), then its
// mean over the sequence axis: [B, 1]. Two kernels: a row kernel storing
// the per-token mean squares, then a reduction over S of their square roots.
inline Chain SequenceMeanOfTokenRms(DType t, int64_t b, int64_t s, int64_t h) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Dim::Static(b), Size(&c, s, "s"), Dim::Static(h)}});
  int32_t ms = Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {x, x}), {2}, true);
  c.outputs = {Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kSqrt, {ms}), {1}, false)};
  return Finish(std::move(c));
}

// Of logits x [N, M] and target probabilities y [N, M]: the mean over rows
// of logsumexp(x) - sum(x * y), a scalar, as a cross-entropy loss is
// computed; with `probs`, softmax(x) beside it. Two kernels: a row kernel
// storing the per-row max, sum of exps and target term (and writing the
// probabilities), then a kernel of one row, [N] wide, reducing the loss.
inline Chain RowLossMean(DType t, int64_t n, int64_t m, bool probs = false) {
  Chain c;
  const Dim rows = Size(&c, n, "n");
  int32_t x = c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t y = c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t mx = Reduce(&c, OpKind::kReduceMax, x, {1}, true);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {x, mx})});
  int32_t lse = c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kLog, {Reduce(&c, OpKind::kReduceSum, e, {1}, false)}),
                                       Reduce(&c, OpKind::kReduceMax, x, {1}, false)});
  int32_t target = Reduce(&c, OpKind::kReduceSum, c.AddOp(OpKind::kMul, {x, y}), {1}, false);
  int32_t per_row = c.AddOp(OpKind::kSub, {lse, target});
  c.outputs = {Reduce(&c, OpKind::kReduceMean, per_row, {0}, false)};
  if (probs) {
    c.outputs.push_back(c.AddOp(OpKind::kDiv, {e, Reduce(&c, OpKind::kReduceSum, e, {1}, true)}));
  }
  return Finish(std::move(c));
}

// mean((a - b)^2) over both axes of a, b [N, M]: a scalar, or [1, 1] with
// keepdim. Canonicalize splits it: a row kernel storing the per-row means
// (in f32 for 16-bit inputs), then a kernel of one row reducing them (with
// keepdim, a reduction kernel over axis 0, and for 16-bit inputs a
// pointwise kernel casting its result back).
inline Chain MeanSquaredError(DType t, int64_t n, int64_t m, bool keepdim = false) {
  Chain c;
  const Dim rows = Size(&c, n, "n");
  int32_t a = c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t b = c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t d = c.AddOp(OpKind::kSub, {a, b});
  c.outputs = {Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {d, d}), {0, 1}, keepdim)};
  return Finish(std::move(c));
}

// The test labels' columns: labels -3 to 3 (from test inputs in [-4, 4])
// pick column (label + 3) * ((M - 1) / 6), the first, the last when 6
// divides M - 1, and five between; [N] brought to [N, 1] by a reshape.
inline int32_t LabelColumn(Chain* c, int32_t label, Dim rows, int64_t m) {
  int32_t column = c->AddOp(OpKind::kMul, {c->AddOp(OpKind::kAdd, {label, c->AddConstant(3)}),
                                           c->AddConstant(static_cast<double>((m - 1) / 6))});
  int32_t picked = c->AddOp(OpKind::kReshape, {column});
  c->nodes[picked].shape = {rows, Dim::Static(1)};
  return picked;
}

// x's element at `column` of each row: a sum over the row of x where an
// iota along it equals the column (compared as iota == column, or the
// other way round).
inline int32_t PickColumn(Chain* c, int32_t x, int32_t column, int64_t m, bool iota_first) {
  int32_t iota = c->AddOp(OpKind::kIota, {});
  c->nodes[iota].shape = {Dim::Static(m)};
  c->nodes[iota].axis = 0;
  c->nodes[iota].dtype = DType::kI32;
  int32_t hit = c->AddOp(OpKind::kEq, iota_first ? std::vector<int32_t>{iota, column}
                                                  : std::vector<int32_t>{column, iota});
  return Reduce(c, OpKind::kReduceSum, c->AddOp(OpKind::kWhere, {hit, x, c->AddConstant(0)}),
                {1}, false);
}

// Cross-entropy of x [N, M] with class labels [N] (i64, as torch holds
// them), rows whose label is 0 ignored: lse(x) - x[label] per row, 0 where
// ignored, as F.cross_entropy(..., ignore_index=0, reduction="none"); with
// `mean`, their sum over the rows not ignored. Without `mean`, one row
// kernel; with it, a row kernel storing the per-row reductions, then a
// kernel of one row, [N] wide, reducing the losses and counting the labels.
inline Chain CrossEntropyWithLabels(DType t, int64_t n, int64_t m, bool mean = false) {
  Chain c;
  const Dim rows = Size(&c, n, "n");
  int32_t x = c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t labels = c.AddInput(TensorType{DType::kI64, {rows}});
  int32_t label = c.AddCast(labels, DType::kI32);
  int32_t target = PickColumn(&c, x, LabelColumn(&c, label, rows, m), m, true);
  int32_t mx = Reduce(&c, OpKind::kReduceMax, x, {1}, true);
  int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {x, mx})});
  int32_t lse = c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kLog, {Reduce(&c, OpKind::kReduceSum, e, {1}, false)}),
                                       Reduce(&c, OpKind::kReduceMax, x, {1}, false)});
  int32_t kept = c.AddOp(OpKind::kNe, {label, c.AddConstant(0)});
  int32_t loss = c.AddOp(OpKind::kWhere, {kept, c.AddOp(OpKind::kSub, {lse, target}), c.AddConstant(0)});
  if (!mean) {
    c.outputs = {loss};
    return Finish(std::move(c));
  }
  int32_t total = Reduce(&c, OpKind::kReduceSum, c.AddCast(loss, DType::kF32), {0}, false);
  int32_t count = Reduce(&c, OpKind::kReduceSum, c.AddCast(kept, DType::kF32), {0}, false);
  c.outputs = {c.AddCast(c.AddOp(OpKind::kDiv, {total, count}), t)};
  return Finish(std::move(c));
}

// F.nll_loss of log-probabilities logp [N, M] with i64 labels [N], none
// ignored (ignore_index -100; test labels are -3 to 3): per row
// -logp[label], then their mean over the rows. The log-probabilities are an
// input (the pick is the row kernel's only reduction) or, as an ATen trace
// of F.cross_entropy has them, _log_softmax(x) computed in x's dtype, (x -
// max) - log(sum(exp(x - max))), whose value at the label's column the
// pick computes there.
inline Chain NllLoss(DType t, int64_t n, int64_t m, bool of_log_softmax = false) {
  Chain c;
  const Dim rows = Size(&c, n, "n");
  int32_t logp = c.AddInput(TensorType{t, {rows, Dim::Static(m)}});
  int32_t labels = c.AddInput(TensorType{DType::kI64, {rows}});
  if (of_log_softmax) {
    int32_t shifted = c.AddOp(OpKind::kSub, {logp, Reduce(&c, OpKind::kReduceMax, logp, {1}, true)});
    int32_t sum = Reduce(&c, OpKind::kReduceSum, c.AddOp(OpKind::kExp, {shifted}), {1}, true);
    logp = c.AddOp(OpKind::kSub, {shifted, c.AddOp(OpKind::kLog, {sum})});
  }
  int32_t label = c.AddCast(labels, DType::kI32);
  int32_t target = PickColumn(&c, logp, LabelColumn(&c, label, rows, m), m, false);
  int32_t kept = c.AddOp(OpKind::kNe, {label, c.AddConstant(-100)});
  int32_t loss = c.AddOp(OpKind::kWhere, {kept, c.AddOp(OpKind::kNeg, {target}), c.AddConstant(0)});
  c.outputs = {Reduce(&c, OpKind::kReduceMean, loss, {0}, false)};
  return Finish(std::move(c));
}

}  // namespace kfuse::reduce_test

#endif  // KFUSE_CODEGEN_REDUCE_TEST_CHAINS_H_
