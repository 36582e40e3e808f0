// Attention chains for the attention family's tests (CPU, NVRTC and GPU),
// expanded as the clients' `attention` composite expands them
// (clients/python/kfuse/chain.py): grouped-query heads through reshapes, a
// bias, a boolean mask, the causal mask and per-sequence lengths combined,
// masked rows guarded to zeros, and the log-sum-exp output.
//
//   attention_test::Options o;  o.causal = true;
//   Chain c = attention_test::Attention(o);   // validated, canonical
#ifndef KFUSE_CODEGEN_ATTENTION_TEST_CHAINS_H_
#define KFUSE_CODEGEN_ATTENTION_TEST_CHAINS_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "codegen/row_test_chains.h"

namespace kfuse::attention_test {

struct Options {
  DType dtype = DType::kBF16;
  int64_t batch = 2, heads = 4, kv_heads = 4, sq = 128, sk = 128, d = 64, dv = 64;
  bool causal = false;
  bool mask = false;     // bool [batch, heads, sq, sk] input.
  bool bias = false;     // dtype [1, heads, sq, sk] input.
  bool lengths = false;  // i32 [batch] input.
  bool lse = false;
  bool symbolic_seq = false;  // sq and sk one symbol "seq" (sq must equal sk).
  // q, k and v sliced from one [batch, sq, 3 * heads * d] input (a fused
  // projection's), heads first by a permute; the output's heads put back
  // between the tokens and the head dim, [batch, sq, heads * dv]. Needs
  // sq == sk, heads == kv_heads, d == dv, static.
  bool packed = false;
  // Grouped-query heads as Hugging Face's repeat_kv writes them: k and v
  // [batch, kv_heads, sk, d] unsqueezed, expanded and reshaped to [batch,
  // heads, sk, d] (a broadcast dim merged into the kv heads), q [batch,
  // heads, sq, d]; plain multi-head attention from there.
  bool repeat_kv = false;
};

// The composite from q, k, v (and the mask, bias and lengths inputs, -1
// where absent) over scores of shape `score`: the product PV; the row max
// and sum in `m` and `z`.
inline int32_t Composite(Chain& c, const Options& o, int32_t q, int32_t k, int32_t v, int32_t mask,
                         int32_t bias, int32_t lens, const std::vector<Dim>& score, int32_t* m,
                         int32_t* z) {
  auto reshape = [&](int32_t x, std::vector<Dim> shape) {
    const int32_t r = c.AddOp(OpKind::kReshape, {x});
    c.nodes[r].shape = std::move(shape);
    return r;
  };
  const int r = static_cast<int>(score.size());
  const int32_t kt = c.AddOp(OpKind::kPermute, {k});
  for (int i = 0; i < r; ++i) c.nodes[kt].axes.push_back(i < r - 2 ? i : (i == r - 2 ? r - 1 : r - 2));
  int32_t s = c.AddOp(OpKind::kMatmul, {q, kt});
  s = c.AddOp(OpKind::kMul, {s, c.AddConstant(1.0 / std::sqrt(static_cast<double>(o.d)))});
  if (bias >= 0) s = c.AddOp(OpKind::kAdd, {s, bias});
  int32_t allowed = mask;
  auto conj = [&](int32_t cond) {
    allowed = allowed < 0 ? cond : c.AddOp(OpKind::kLogicalAnd, {allowed, cond});
  };
  if (o.causal || o.lengths) {
    auto iota = [&](int axis) {
      const int32_t i = c.AddOp(OpKind::kIota, {});
      c.nodes[i].shape = score;
      c.nodes[i].axis = axis;
      c.nodes[i].dtype = DType::kI32;
      return i;
    };
    const int32_t col = iota(r - 1);
    if (o.causal) conj(c.AddOp(OpKind::kLe, {col, iota(r - 2)}));
    if (o.lengths) {
      std::vector<Dim> ls = {score[0]};
      for (int i = 1; i < r; ++i) ls.push_back(Dim::Static(1));
      conj(c.AddOp(OpKind::kLt, {col, reshape(lens, ls)}));
    }
  }
  if (allowed >= 0) s = c.AddOp(OpKind::kWhere, {allowed, s, c.AddConstant(-INFINITY)});
  *m = row_test::Reduce(&c, OpKind::kReduceMax, s, r - 1);
  const int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {s, *m})});
  *z = row_test::Reduce(&c, OpKind::kReduceSum, e, r - 1);
  int32_t p = c.AddOp(OpKind::kDiv, {e, *z});
  if (o.mask || o.lengths || o.bias) {
    const int32_t masked = c.AddOp(OpKind::kEq, {*m, c.AddConstant(-INFINITY)});
    p = c.AddOp(OpKind::kWhere, {masked, c.AddConstant(0.0), p});
  }
  return c.AddOp(OpKind::kMatmul, {p, v});
}

inline Chain Attention(const Options& o) {
  Chain c;
  auto S = [](int64_t n) { return Dim::Static(n); };
  Dim sq = S(o.sq), sk = S(o.sk);
  if (o.symbolic_seq) {
    c.symbols.push_back(SymbolInfo{"seq", o.sq, 0});
    sq = sk = Dim::Sym(0);
  }
  const int64_t g = o.heads / o.kv_heads;
  const Dim B = S(o.batch), H = S(o.heads), Hkv = S(o.kv_heads), G = S(g), D = S(o.d), Dv = S(o.dv);
  int32_t q, k, v;
  if (o.packed) {
    const int32_t qkv = c.AddInput(TensorType{o.dtype, {B, sq, S(3 * o.heads * o.d)}});
    auto heads_first = [&](int part) {
      const int32_t s = c.AddOp(OpKind::kSlice, {qkv});
      c.nodes[s].axis = 2;
      c.nodes[s].start = part * o.heads * o.d;
      c.nodes[s].stop = (part + 1) * o.heads * o.d;
      const int32_t r = c.AddOp(OpKind::kReshape, {s});
      c.nodes[r].shape = {B, sq, H, D};
      const int32_t p = c.AddOp(OpKind::kPermute, {r});
      c.nodes[p].axes = {0, 2, 1, 3};
      return p;
    };
    q = heads_first(0), k = heads_first(1), v = heads_first(2);
  } else {
    q = c.AddInput(TensorType{o.dtype, {B, H, sq, D}});
    k = c.AddInput(TensorType{o.dtype, {B, Hkv, sk, D}});
    v = c.AddInput(TensorType{o.dtype, {B, Hkv, sk, Dv}});
  }
  int32_t mask = o.mask ? c.AddInput(TensorType{DType::kBool, {B, H, sq, sk}}) : -1;
  int32_t bias = o.bias ? c.AddInput(TensorType{o.dtype, {S(1), H, sq, sk}}) : -1;
  const int32_t lens = o.lengths ? c.AddInput(TensorType{DType::kI32, {B}}) : -1;
  auto reshape = [&](int32_t x, std::vector<Dim> shape) {
    const int32_t r = c.AddOp(OpKind::kReshape, {x});
    c.nodes[r].shape = std::move(shape);
    return r;
  };
  std::vector<Dim> score = {B, H, sq, sk};
  if (o.repeat_kv) {
    auto repeated = [&](int32_t x, const Dim& d) {
      const int32_t e = c.AddOp(OpKind::kExpand, {reshape(x, {B, Hkv, S(1), sk, d})});
      c.nodes[e].shape = {B, Hkv, G, sk, d};
      return reshape(e, {B, H, sk, d});
    };
    k = repeated(k, D);
    v = repeated(v, Dv);
  } else if (g > 1) {
    q = reshape(q, {B, Hkv, G, sq, D});
    k = reshape(k, {B, Hkv, S(1), sk, D});
    v = reshape(v, {B, Hkv, S(1), sk, Dv});
    if (mask >= 0) mask = reshape(mask, {B, Hkv, G, sq, sk});
    if (bias >= 0) bias = reshape(bias, {S(1), Hkv, G, sq, sk});
    score = {B, Hkv, G, sq, sk};
  }
  int32_t m, z;
  int32_t out = Composite(c, o, q, k, v, mask, bias, lens, score, &m, &z);
  if (g > 1 && !o.repeat_kv) out = reshape(out, {B, H, sq, Dv});
  if (o.packed) {
    const int32_t back = c.AddOp(OpKind::kPermute, {out});
    c.nodes[back].axes = {0, 2, 1, 3};
    out = reshape(back, {B, sq, S(o.heads * o.dv)});
  }
  c.outputs.push_back(out);
  if (o.lse) {
    int32_t lse = c.AddCast(c.AddOp(OpKind::kAdd, {m, c.AddOp(OpKind::kLog, {z})}), DType::kF32);
    c.outputs.push_back(reshape(lse, {B, H, sq}));
  }
  return row_test::Finish(std::move(c));
}

// A causal self-attention between projections, as kfuse.torch translates
// one: qkv = x @ w_qkv [tokens, 3 * heads * d], its three parts sliced,
// reshaped to [tokens, heads, d] and transposed to heads first, the
// composite, its output transposed back and reshaped to [tokens, heads * d]
// for the output projection @ w_o. (o.sq tokens; o.heads, o.d.)
inline Chain AttentionBlock(const Options& o) {
  Chain c;
  auto S = [](int64_t n) { return Dim::Static(n); };
  const int64_t hd = o.heads * o.d;
  const int32_t x = c.AddInput(TensorType{o.dtype, {S(o.sq), S(hd)}});
  const int32_t w = c.AddInput(TensorType{o.dtype, {S(hd), S(3 * hd)}});
  const int32_t wo = c.AddInput(TensorType{o.dtype, {S(hd), S(hd)}});
  const int32_t qkv = c.AddOp(OpKind::kMatmul, {x, w});
  auto heads_first = [&](int part) {
    const int32_t s = c.AddOp(OpKind::kSlice, {qkv});
    c.nodes[s].axis = 1;
    c.nodes[s].start = part * hd;
    c.nodes[s].stop = (part + 1) * hd;
    const int32_t r = c.AddOp(OpKind::kReshape, {s});
    c.nodes[r].shape = {S(o.sq), S(o.heads), S(o.d)};
    const int32_t p = c.AddOp(OpKind::kPermute, {r});
    c.nodes[p].axes = {1, 0, 2};
    return p;
  };
  const int32_t q = heads_first(0), k = heads_first(1), v = heads_first(2);
  Options causal = o;
  causal.causal = true;
  int32_t m, z;
  const int32_t a = Composite(c, causal, q, k, v, -1, -1, -1, {S(o.heads), S(o.sq), S(o.sq)}, &m, &z);
  const int32_t back = c.AddOp(OpKind::kPermute, {a});
  c.nodes[back].axes = {1, 0, 2};
  const int32_t rows = c.AddOp(OpKind::kReshape, {back});
  c.nodes[rows].shape = {S(o.sq), S(hd)};
  c.outputs = {c.AddOp(OpKind::kMatmul, {rows, wo})};
  return row_test::Finish(std::move(c));
}

}  // namespace kfuse::attention_test

#endif  // KFUSE_CODEGEN_ATTENTION_TEST_CHAINS_H_
