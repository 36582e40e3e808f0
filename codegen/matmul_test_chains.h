// Matmul chains for the matmul family's tests (CPU, NVRTC and GPU), as a
// client would send them: a linear layer with bias and activation, its
// weight row-major [K, N] or as nn.Linear keeps it ([N, K], transposed by a
// permute), batched products with a residual.
//
//   Chain c = matmul_test::Linear(DType::kBF16, 16, 8192, 8192);   // validated, canonical
//   KernelGroup g = matmul_test::WholeGroup(c);
#ifndef KFUSE_CODEGEN_MATMUL_TEST_CHAINS_H_
#define KFUSE_CODEGEN_MATMUL_TEST_CHAINS_H_

#include <cstdint>
#include <vector>

#include "codegen/partition.h"
#include "codegen/row_test_chains.h"

namespace kfuse::matmul_test {

enum class Weight { kRowMajor, kLinear };  // [K, N], or [N, K] transposed.

// act(x @ w + bias) for x [rows, K]; rows < 0: a symbol "rows" with hint
// -rows. act: kGeluTanh, kRelu, kSilu... or kInvalid for none.
inline Chain Linear(DType t, int64_t rows, int64_t n, int64_t k, Weight w = Weight::kRowMajor,
                    OpKind act = OpKind::kGeluTanh, bool bias = true) {
  Chain c;
  Dim r = row_test::Rows(&c, rows);
  const int32_t x = c.AddInput(TensorType{t, {r, Dim::Static(k)}});
  // Inputs come first: x, the weight, the bias.
  int32_t wt = w == Weight::kRowMajor
                   ? c.AddInput(TensorType{t, {Dim::Static(k), Dim::Static(n)}})
                   : c.AddInput(TensorType{t, {Dim::Static(n), Dim::Static(k)}});
  const int32_t b = bias ? c.AddInput(TensorType{t, {Dim::Static(n)}}) : -1;
  if (w == Weight::kLinear) {
    wt = c.AddOp(OpKind::kPermute, {wt});
    c.nodes[wt].axes = {1, 0};
  }
  int32_t y = c.AddOp(OpKind::kMatmul, {x, wt});
  if (bias) y = c.AddOp(OpKind::kAdd, {y, b});
  if (act != OpKind::kInvalid) y = c.AddOp(act, {y});
  c.outputs.push_back(y);
  return row_test::Finish(std::move(c));
}

// (a @ b) * scale + residual over batches: a [B, M, K], b [K, N] broadcast
// over the batch (expand), residual [B, M, N]; outputs the product too.
inline Chain BatchedResidual(DType t, int64_t batch, int64_t m, int64_t n, int64_t k) {
  Chain c;
  const int32_t a = c.AddInput(TensorType{t, {Dim::Static(batch), Dim::Static(m), Dim::Static(k)}});
  const int32_t b = c.AddInput(TensorType{t, {Dim::Static(k), Dim::Static(n)}});
  const int32_t res =
      c.AddInput(TensorType{t, {Dim::Static(batch), Dim::Static(m), Dim::Static(n)}});
  const int32_t be = c.AddOp(OpKind::kExpand, {b});
  c.nodes[be].shape = {Dim::Static(batch), Dim::Static(k), Dim::Static(n)};
  const int32_t p = c.AddOp(OpKind::kMatmul, {a, be});
  const int32_t s = c.AddOp(OpKind::kMul, {p, c.AddConstant(0.125)});
  const int32_t y = c.AddOp(OpKind::kAdd, {s, res});
  c.outputs = {y, p};
  return row_test::Finish(std::move(c));
}

// A transformer MLP: gelu_tanh(x @ w1 + b1) @ w2, x [tokens, d], w1 [d, ff],
// w2 [ff, d]; or, gated, (silu(x @ w1) * (x @ w3)) @ w2 (SwiGLU).
inline Chain Mlp(DType t, int64_t tokens, int64_t d, int64_t ff, bool gated = false) {
  Chain c;
  const Dim T = Dim::Static(tokens), D = Dim::Static(d), F = Dim::Static(ff);
  const int32_t x = c.AddInput(TensorType{t, {T, D}});
  const int32_t w1 = c.AddInput(TensorType{t, {D, F}});
  const int32_t b1_or_w3 = c.AddInput(gated ? TensorType{t, {D, F}} : TensorType{t, {F}});
  const int32_t w2 = c.AddInput(TensorType{t, {F, D}});
  int32_t h = c.AddOp(OpKind::kMatmul, {x, w1});
  if (gated) {
    h = c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSilu, {h}), c.AddOp(OpKind::kMatmul, {x, b1_or_w3})});
  } else {
    h = c.AddOp(OpKind::kGeluTanh, {c.AddOp(OpKind::kAdd, {h, b1_or_w3})});
  }
  c.outputs.push_back(c.AddOp(OpKind::kMatmul, {h, w2}));
  return row_test::Finish(std::move(c));
}

// softmax(x @ w * 0.125) over the product's rows (attention scores without
// the mask, a mixture of experts' router): rows of at most
// kMaxEpilogueRow in the product's epilogue, else a matmul kernel, then a
// row kernel reading it.
inline Chain SoftmaxOfProduct(DType t, int64_t m, int64_t n, int64_t k) {
  Chain c;
  const int32_t x = c.AddInput(TensorType{t, {Dim::Static(m), Dim::Static(k)}});
  const int32_t w = c.AddInput(TensorType{t, {Dim::Static(k), Dim::Static(n)}});
  const int32_t s = c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kMatmul, {x, w}), c.AddConstant(0.125)});
  const int32_t mx = row_test::Reduce(&c, OpKind::kReduceMax, s, 1);
  const int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {s, mx})});
  c.outputs = {c.AddOp(OpKind::kDiv, {e, row_test::Reduce(&c, OpKind::kReduceSum, e, 1)})};
  return row_test::Finish(std::move(c));
}

// softmax(x @ w1) @ w2 over batches (x [B, M, K], w1 [K, N], w2 [N, N2]):
// with N at most kMaxEpilogueRow the first product's kernel reduces its rows
// and stores the probabilities the second product streams. With `probs_out`,
// the probabilities p and (s - max) - p are outputs too.
inline Chain SoftmaxThenProduct(DType t, int64_t batch, int64_t m, int64_t n, int64_t k,
                                int64_t n2, bool probs_out = false) {
  Chain c;
  const Dim B = Dim::Static(batch), M = Dim::Static(m), N = Dim::Static(n), K = Dim::Static(k);
  const int32_t x = c.AddInput(TensorType{t, {B, M, K}});
  const int32_t w1 = c.AddInput(TensorType{t, {K, N}});
  const int32_t w2 = c.AddInput(TensorType{t, {N, Dim::Static(n2)}});
  auto expand = [&](int32_t w, Dim rows, Dim cols) {
    const int32_t e = c.AddOp(OpKind::kExpand, {w});
    c.nodes[e].shape = {B, rows, cols};
    return e;
  };
  const int32_t s = c.AddOp(OpKind::kMatmul, {x, expand(w1, K, N)});
  const int32_t mx = row_test::Reduce(&c, OpKind::kReduceMax, s, 2);
  const int32_t shifted = c.AddOp(OpKind::kSub, {s, mx});
  const int32_t e = c.AddOp(OpKind::kExp, {shifted});
  const int32_t p = c.AddOp(OpKind::kDiv, {e, row_test::Reduce(&c, OpKind::kReduceSum, e, 2)});
  c.outputs = {c.AddOp(OpKind::kMatmul, {p, expand(w2, N, Dim::Static(n2))})};
  if (probs_out) c.outputs = {c.outputs[0], p, c.AddOp(OpKind::kSub, {shifted, p})};
  return row_test::Finish(std::move(c));
}

// p = softmax(x @ w1) over rows (x [M, K], w1 [K, N]) and p + p @ w2 (w2
// [N, N]); outputs p and the sum, p first or last.
inline Chain ProbsBesideTheirProduct(DType t, int64_t m, int64_t n, int64_t k, bool probs_first) {
  Chain c;
  const int32_t x = c.AddInput(TensorType{t, {Dim::Static(m), Dim::Static(k)}});
  const int32_t w1 = c.AddInput(TensorType{t, {Dim::Static(k), Dim::Static(n)}});
  const int32_t w2 = c.AddInput(TensorType{t, {Dim::Static(n), Dim::Static(n)}});
  const int32_t s = c.AddOp(OpKind::kMatmul, {x, w1});
  const int32_t e =
      c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {s, row_test::Reduce(&c, OpKind::kReduceMax, s, 1)})});
  const int32_t p = c.AddOp(OpKind::kDiv, {e, row_test::Reduce(&c, OpKind::kReduceSum, e, 1)});
  const int32_t sum = c.AddOp(OpKind::kAdd, {p, c.AddOp(OpKind::kMatmul, {p, w2})});
  c.outputs = probs_first ? std::vector<int32_t>{p, sum} : std::vector<int32_t>{sum, p};
  return row_test::Finish(std::move(c));
}

// LayerNorm over the rows of x @ w + b (weight g, bias beta, eps 1e-5), the
// weight [K, N] or as nn.Linear keeps it; outputs the normalised rows and
// each row's 1 / std ([M, 1]). With N at most kMaxEpilogueRow, one kernel.
inline Chain ProductLayerNorm(DType t, int64_t m, int64_t n, int64_t k,
                              Weight wl = Weight::kRowMajor) {
  Chain c;
  const Dim K = Dim::Static(k), N = Dim::Static(n);
  const int32_t x = c.AddInput(TensorType{t, {Dim::Static(m), K}});
  int32_t w = c.AddInput(wl == Weight::kRowMajor ? TensorType{t, {K, N}} : TensorType{t, {N, K}});
  const int32_t b = c.AddInput(TensorType{t, {N}});
  const int32_t g = c.AddInput(TensorType{t, {N}});
  const int32_t beta = c.AddInput(TensorType{t, {N}});
  if (wl == Weight::kLinear) {
    w = c.AddOp(OpKind::kPermute, {w});
    c.nodes[w].axes = {1, 0};
  }
  const int32_t y = c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMatmul, {x, w}), b});
  const int32_t mean = row_test::Reduce(&c, OpKind::kReduceMean, y, 1);
  const int32_t d = c.AddOp(OpKind::kSub, {y, mean});
  const int32_t var = row_test::Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {d, d}), 1);
  const int32_t r = c.AddOp(OpKind::kRsqrt, {c.AddOp(OpKind::kAdd, {var, c.AddConstant(1e-5)})});
  c.outputs = {c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kMul, {d, r}), g}), beta}),
               r};
  return row_test::Finish(std::move(c));
}

// LayerNorm(x) (weight, bias, eps 1e-5) @ w + b: a row kernel stores the
// normalised rows, then a matmul kernel.
inline Chain LayerNormLinear(DType t, int64_t m, int64_t n, int64_t k) {
  Chain c;
  const Dim K = Dim::Static(k), N = Dim::Static(n);
  const int32_t x = c.AddInput(TensorType{t, {Dim::Static(m), K}});
  const int32_t g = c.AddInput(TensorType{t, {K}});
  const int32_t beta = c.AddInput(TensorType{t, {K}});
  const int32_t w = c.AddInput(TensorType{t, {K, N}});
  const int32_t b = c.AddInput(TensorType{t, {N}});
  const int32_t mean = row_test::Reduce(&c, OpKind::kReduceMean, x, 1);
  const int32_t d = c.AddOp(OpKind::kSub, {x, mean});
  const int32_t var = row_test::Reduce(&c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {d, d}), 1);
  const int32_t r = c.AddOp(OpKind::kRsqrt, {c.AddOp(OpKind::kAdd, {var, c.AddConstant(1e-5)})});
  const int32_t y = c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kMul, {d, r}), g}), beta});
  c.outputs = {c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMatmul, {y, w}), b})};
  return row_test::Finish(std::move(c));
}

// The one kernel of a chain whose nodes all join the product's kernel: every
// computed node, the outputs as results.
inline KernelGroup WholeGroup(const Chain& c) {
  KernelGroup g;
  g.family = Family::kMatmul;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    const OpKind k = c.nodes[id].kind;
    if (k == OpKind::kInput || k == OpKind::kConstant) continue;
    // Views of operands are read as strides, not computed.
    if ((k == OpKind::kPermute || k == OpKind::kExpand) &&
        c.nodes[c.nodes[id].args[0]].kind == OpKind::kInput)
      continue;
    g.nodes.push_back(id);
  }
  std::vector<int32_t> res(c.outputs.begin(), c.outputs.end());
  std::sort(res.begin(), res.end());
  res.erase(std::unique(res.begin(), res.end()), res.end());
  g.results = res;
  g.reason = "test";
  return g;
}

}  // namespace kfuse::matmul_test

#endif  // KFUSE_CODEGEN_MATMUL_TEST_CHAINS_H_
