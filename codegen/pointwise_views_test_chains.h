// Chains with layout views for the pointwise family's tests (CPU, golden,
// NVRTC and GPU), built as a client would send them: rotary embeddings,
// chunked SwiGLU, a permuted [B,S,H,D] input, strided slices, reshapes and
// concats of computed values.
//
//   Chain c = views_test::Rope(DType::kBF16, 7, 8, 64);   // validated, canonical
#ifndef KFUSE_CODEGEN_POINTWISE_VIEWS_TEST_CHAINS_H_
#define KFUSE_CODEGEN_POINTWISE_VIEWS_TEST_CHAINS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/canonicalize.h"
#include "codegen/ir.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse::views_test {

inline Dim S(int64_t n) { return Dim::Static(n); }

// rows < 0: a symbol "rows" with hint -rows.
inline Dim Rows(Chain* c, int64_t rows) {
  if (rows >= 0) return Dim::Static(rows);
  c->symbols.push_back(SymbolInfo{"rows", -rows, 0});
  return Dim::Sym(static_cast<int32_t>(c->symbols.size() - 1));
}

inline int32_t Slice(Chain* c, int32_t x, int64_t axis, int64_t start, int64_t stop,
                     int64_t step = 1) {
  int32_t s = c->AddOp(OpKind::kSlice, {x});
  c->nodes[s].axis = axis;
  c->nodes[s].start = start;
  c->nodes[s].stop = stop;
  c->nodes[s].step = step;
  return s;
}

inline int32_t Concat(Chain* c, std::vector<int32_t> xs, int64_t axis) {
  int32_t k = c->AddOp(OpKind::kConcat, std::move(xs));
  c->nodes[k].axis = axis;
  return k;
}

inline int32_t Permute(Chain* c, int32_t x, std::vector<int64_t> perm) {
  int32_t p = c->AddOp(OpKind::kPermute, {x});
  c->nodes[p].axes = std::move(perm);
  return p;
}

inline int32_t Reshape(Chain* c, int32_t x, std::vector<Dim> shape, OpKind k = OpKind::kReshape) {
  int32_t r = c->AddOp(k, {x});
  c->nodes[r].shape = std::move(shape);
  return r;
}

// Validated and canonical, ops numbered as a client's; aborts on a bad chain
// (a test bug).
inline Chain Finish(Chain c) {
  for (size_t i = 0, w = 0; i < c.nodes.size(); ++i) {
    if (c.nodes[i].kind != OpKind::kInput) c.nodes[i].wire_index = static_cast<int32_t>(w++);
  }
  absl::StatusOr<Chain> v = Validate(std::move(c));
  KFUSE_CHECK(v.ok());
  return Canonicalize(*v);
}

// Rotary embedding of x [T, H, D] with cos, sin [T, 1, D] (T = rows):
// x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x[..., D/2:],
// x[..., :D/2]) along the last axis.
inline Chain Rope(DType t, int64_t rows, int64_t heads, int64_t head_dim) {
  Chain c;
  const Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, S(heads), S(head_dim)}});
  int32_t cos = c.AddInput(TensorType{t, {r, S(1), S(head_dim)}});
  int32_t sin = c.AddInput(TensorType{t, {r, S(1), S(head_dim)}});
  const int64_t h = head_dim / 2;
  int32_t lo = Slice(&c, x, 2, 0, h), hi = Slice(&c, x, 2, h, head_dim);
  int32_t rot = Concat(&c, {c.AddOp(OpKind::kNeg, {hi}), lo}, 2);
  c.outputs.push_back(
      c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {x, cos}), c.AddOp(OpKind::kMul, {rot, sin})}));
  return Finish(std::move(c));
}

// Interleaved rotary embedding (rotate_every_two) of x [T, H, D] with cos,
// sin [T, 1, D]: x * cos + r * sin, r = stack(-x[..., 1::2], x[..., 0::2],
// -1).flatten(-2): pieces [T, H, D/2, 1] concatenated along a new last axis,
// then merged with the one before it, which no view of the pieces is (the
// kernel iterates over [T, H, D/2, 2]).
inline Chain InterleavedRope(DType t, int64_t rows, int64_t heads, int64_t head_dim) {
  Chain c;
  const Dim r = Rows(&c, rows);
  int32_t x = c.AddInput(TensorType{t, {r, S(heads), S(head_dim)}});
  int32_t cos = c.AddInput(TensorType{t, {r, S(1), S(head_dim)}});
  int32_t sin = c.AddInput(TensorType{t, {r, S(1), S(head_dim)}});
  const int64_t h = head_dim / 2;
  auto column = [&](int32_t v) { return Reshape(&c, v, {r, S(heads), S(h), S(1)}); };
  int32_t even = Slice(&c, x, 2, 0, head_dim, 2), odd = Slice(&c, x, 2, 1, head_dim, 2);
  int32_t pairs = Concat(&c, {column(c.AddOp(OpKind::kNeg, {odd})), column(even)}, 3);
  int32_t rot = Reshape(&c, pairs, {r, S(heads), S(head_dim)});
  c.outputs.push_back(
      c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {x, cos}), c.AddOp(OpKind::kMul, {rot, sin})}));
  return Finish(std::move(c));
}

// Chunked SwiGLU of x [rows, 2h]: silu(x[:, :h]) * x[:, h:].
inline Chain Swiglu(DType t, int64_t rows, int64_t hidden) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Rows(&c, rows), S(2 * hidden)}});
  int32_t gate = Slice(&c, x, 1, 0, hidden), up = Slice(&c, x, 1, hidden, 2 * hidden);
  c.outputs.push_back(c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSilu, {gate}), up}));
  return Finish(std::move(c));
}

// x [B, S, H, D] permuted to [B, H, S, D], times `scale`.
inline Chain PermuteScale(DType t, int64_t b, int64_t s, int64_t h, int64_t d, double scale) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {S(b), S(s), S(h), S(d)}});
  int32_t p = Permute(&c, x, {0, 2, 1, 3});
  c.outputs.push_back(c.AddOp(OpKind::kMul, {p, c.AddConstant(scale)}));
  return Finish(std::move(c));
}

// Even and odd columns of x [rows, 2w]: x[:, 0::2] * 2 - x[:, 1::2].
inline Chain SliceStep2(DType t, int64_t rows, int64_t w) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Rows(&c, rows), S(2 * w)}});
  int32_t even = Slice(&c, x, 1, 0, 2 * w, 2), odd = Slice(&c, x, 1, 1, 2 * w, 2);
  c.outputs.push_back(
      c.AddOp(OpKind::kSub, {c.AddOp(OpKind::kMul, {even, c.AddConstant(2.0)}), odd}));
  return Finish(std::move(c));
}

// Differences along the rows of x [rows, w + 1]: x[:, 1:] - x[:, :-1]. Rows
// w + 1 apart, so neither slice keeps the vectors' alignment (both read
// through windows where w is a multiple of the vector).
inline Chain Diff(DType t, int64_t rows, int64_t w) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {Rows(&c, rows), S(w + 1)}});
  c.outputs.push_back(
      c.AddOp(OpKind::kSub, {Slice(&c, x, 1, 1, w + 1), Slice(&c, x, 1, 0, w)}));
  return Finish(std::move(c));
}

// A fused QKV projection's output [rows, 3 * H * D] split, reshaped to
// [rows, H, D] and permuted to [H, rows, D]: q * k (a reshape of a slice, a
// reshape that splits a dim, a permute of a computed value) and v + 1.
inline Chain SplitHeads(DType t, int64_t rows, int64_t heads, int64_t head_dim) {
  Chain c;
  const Dim r = Rows(&c, rows);
  const int64_t w = heads * head_dim;
  int32_t qkv = c.AddInput(TensorType{t, {r, S(3 * w)}});
  auto head = [&](int64_t i) {
    return Reshape(&c, Slice(&c, qkv, 1, i * w, (i + 1) * w), {r, S(heads), S(head_dim)});
  };
  int32_t qk = c.AddOp(OpKind::kMul, {head(0), head(1)});
  c.outputs.push_back(Permute(&c, qk, {1, 0, 2}));
  c.outputs.push_back(Permute(&c, c.AddOp(OpKind::kAdd, {head(2), c.AddConstant(1.0)}), {1, 0, 2}));
  return Finish(std::move(c));
}

// Three pieces of odd widths along the last axis, one computed, one
// broadcast: concat(a [R, 3], exp(b) [R, 5], expand(c [1, 8]) [R, 8]) * d
// [R, 16]. No vector wider than 1 keeps a piece in one vector.
inline Chain OddConcat(DType t, int64_t rows) {
  Chain c;
  const Dim r = Rows(&c, rows);
  int32_t a = c.AddInput(TensorType{t, {r, S(3)}});
  int32_t b = c.AddInput(TensorType{t, {r, S(5)}});
  int32_t e = c.AddInput(TensorType{t, {S(1), S(8)}});
  int32_t d = c.AddInput(TensorType{t, {r, S(16)}});
  int32_t ex = Reshape(&c, e, {r, S(8)}, OpKind::kExpand);
  int32_t k = Concat(&c, {a, c.AddOp(OpKind::kExp, {b}), ex}, 1);
  c.outputs.push_back(c.AddOp(OpKind::kMul, {k, d}));
  return Finish(std::move(c));
}

// Views over views: concat(relu(a) [4, R], b^T [4, R] (b [R, 4]), axis 0)
// [8, R], reshaped (a split) to [2, 4, R], sliced [:, :, 1:], times 3.
inline Chain OuterConcat(DType t, int64_t rows) {
  Chain c;
  int32_t a = c.AddInput(TensorType{t, {S(4), S(rows)}});
  int32_t b = c.AddInput(TensorType{t, {S(rows), S(4)}});
  int32_t k = Concat(&c, {c.AddOp(OpKind::kRelu, {a}), Permute(&c, b, {1, 0})}, 0);
  int32_t r = Reshape(&c, k, {S(2), S(4), S(rows)});
  int32_t s = Slice(&c, r, 2, 1, rows);
  c.outputs.push_back(c.AddOp(OpKind::kMul, {s, c.AddConstant(3.0)}));
  return Finish(std::move(c));
}

// A reshape that is no view of its operand: x [R, 6] transposed, then
// merged to [6 * R] (the kernel iterates over [6, R]).
inline Chain PermuteThenFlatten(DType t, int64_t rows) {
  Chain c;
  int32_t x = c.AddInput(TensorType{t, {S(rows), S(6)}});
  int32_t p = Permute(&c, c.AddOp(OpKind::kExp, {x}), {1, 0});
  c.outputs.push_back(Reshape(&c, p, {S(6 * rows)}));
  return Finish(std::move(c));
}

struct Named {
  std::string name;
  Chain chain;
};

// The chains the NVRTC and GPU tests run (static sizes, odd row counts).
inline std::vector<Named> Chains() {
  std::vector<Named> v;
  for (DType t : {DType::kBF16, DType::kF32}) {
    const std::string dt = t == DType::kBF16 ? "bf16" : "f32";
    for (int64_t d : {64, 128}) {
      v.push_back({"rope_" + dt + "_" + std::to_string(d), Rope(t, 7, 3, d)});
    }
    v.push_back({"swiglu_" + dt, Swiglu(t, 9, 256)});
  }
  v.push_back({"rope_bf16_symbolic_rows", Rope(DType::kBF16, -33, 4, 128)});
  v.push_back({"interleaved_rope_bf16", InterleavedRope(DType::kBF16, 7, 3, 64)});
  v.push_back({"interleaved_rope_f32_symbolic_rows", InterleavedRope(DType::kF32, -9, 2, 128)});
  v.push_back({"permute_then_flatten_f32", PermuteThenFlatten(DType::kF32, 11)});
  v.push_back({"swiglu_bf16_odd_hidden", Swiglu(DType::kBF16, 5, 100)});
  v.push_back({"permute_scale_f32", PermuteScale(DType::kF32, 2, 9, 4, 64, 0.125)});
  v.push_back({"permute_scale_bf16", PermuteScale(DType::kBF16, 3, 5, 2, 128, 0.125)});
  v.push_back({"slice_step2_f32", SliceStep2(DType::kF32, 11, 96)});
  v.push_back({"slice_step2_bf16", SliceStep2(DType::kBF16, 7, 64)});
  v.push_back({"split_heads_bf16", SplitHeads(DType::kBF16, 7, 4, 64)});
  v.push_back({"odd_concat_f32", OddConcat(DType::kF32, 13)});
  v.push_back({"outer_concat_f16", OuterConcat(DType::kF16, 37)});
  v.push_back({"diff_bf16", Diff(DType::kBF16, 7, 256)});
  v.push_back({"diff_f32", Diff(DType::kF32, 5, 64)});
  v.push_back({"diff_f16_symbolic_rows", Diff(DType::kF16, -9, 40)});
  return v;
}

}  // namespace kfuse::views_test

#endif  // KFUSE_CODEGEN_POINTWISE_VIEWS_TEST_CHAINS_H_
