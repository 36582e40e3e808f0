#!/usr/bin/env python3
"""kfuse's kernels against the anchors, on one GPU, in one process: the
pointwise suite, the row suite (softmax, LayerNorm, RMSNorm), the matmul
suite (GEMM + bias + tanh-GELU, and a two-product MLP) and the attention
suite (fused scaled dot-product attention).

Each case is written once, as a function of an `ops` namespace, and becomes
(1) the kfuse chain JSON sent to `kfuse compile` (write-cases; composites
expand to primitives as the client libraries expand them), (2) the eager
PyTorch function (torch.softmax, F.layer_norm, F.rms_norm for composites),
(3) the torch.compile function (static shapes), and (4) the float64
reference the outputs are checked against.

  python3 suite.py write-cases DIR [--quick]        # DIR/<suite>/<case>.json
  python3 suite.py bench --suite S --manifests DIR --out DIR [--quick]

Row cases have a symbolic row count: the chain is tuned for its hint, and
write-cases lists in <case>.rows the counts to run it at (the hint first,
then a sweep for some cases); `bench` finds the sweep's manifests as
<case>@<rows>.json.

`bench` reads one `<case>.json` manifest per case (kfuse-plan-manifest: entry,
cubin, grid, block, parameters evaluated for the case's sizes), launches the
cubins through cuda.bindings on torch's current stream, checks every output
against float64 (error <= 2 x eager's error + 4 eps max|ref|, NaN/inf
positions equal, integers exact), and times kfuse, eager and torch.compile
with triton.testing.do_bench (median, warmup 25, rep 150, as
shared/anchors/anchors.py does), with the 1 GiB device copy measured in the
same run. Bytes are the fewest a kernel must move: each input read once, each
output written once.

Matmul cases are timed beside cuBLASLt's fused epilogue
(torch._addmm_activation), eager addmm + GELU and torch.compile, reported in
TFLOP/s (2 M N K a product) and, for few rows, in GB/s of (M K + K N + M N)
x 2 bytes as shared/anchors count them; they are checked on 64 sampled rows
against float64 (the rows of the first input are the output's rows), and
their compile + tune wall time is read from <case>.compile_s beside the
manifest (run.sh writes it).

Attention cases are the exception to "written once": their chains are
kfuse.chain.attention's, committed under cases/attention/ (make_cases.py
there writes them; write-cases copies them). Each is checked on sampled
(batch, head) pairs and query rows against float64, SDPA's math backend the
yardstick, and timed beside SDPA with the flash backend forced, SDPA's own
choice, the unfused eager chain and its torch.compile, in TFLOP/s (4 B H Sq
Sk D, halved for causal masks); the target is kfuse at least 0.9x SDPA
flash's throughput. Without a kfuse kernel the baselines are still timed.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import random
import shutil
import sys
import time

# ---------------------------------------------------------------------------
# Cases, written once against an `ops` namespace.

F32, F16, BF16, I32, I64, BOOL = "f32", "f16", "bf16", "i32", "i64", "bool"
WIRE_DTYPE = {F32: "DTYPE_F32", F16: "DTYPE_F16", BF16: "DTYPE_BF16", I32: "DTYPE_I32",
              I64: "DTYPE_I64", BOOL: "DTYPE_BOOL"}
ELEM_BYTES = {F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8, BOOL: 1}
SUITES = ("pointwise", "row", "matmul", "attention", "reduce")


class Rows:
    """A symbolic row count: the chain says `rows` (tuned for `hint`); the
    benchmark runs it at `hint` and at each of `sweep`."""

    def __init__(self, hint, sweep=()):
        self.hint, self.sweep = hint, tuple(sweep)


class Case:
    def __init__(self, name, inputs, fn, quick_inputs=None, suite="pointwise"):
        self.name = name
        # [(name, dtype, shape, domain)]; domain "any" (randn), "positive" or
        # "weight" (randn x 0.02).
        self.inputs = inputs
        self.fn = fn          # fn(ops, *inputs) -> {output name: value}, in order.
        self.quick_inputs = quick_inputs or inputs
        self.suite = suite

    def specs(self, quick):
        return self.quick_inputs if quick else self.inputs

    def rows(self, quick):
        """The case's symbolic row count (a Rows), or None."""
        for _, _, shape, _ in self.specs(quick):
            for d in shape:
                if isinstance(d, Rows):
                    return d
        return None


class MatmulCase(Case):
    """A chain of matrix products with element-wise epilogues. `gemms` and
    `quick_gemms`: (M, N, K) of each product; `target`: (baseline, ratio),
    baseline "cublaslt" or "compile", the least kfuse/baseline throughput
    ratio wanted; `vendor(torch, *inputs)`: the same chain through cuBLASLt's
    fused epilogue. Input 0's rows are the output's rows (the check samples
    them)."""

    def __init__(self, name, inputs, fn, quick_inputs, gemms, quick_gemms, target, vendor):
        super().__init__(name, inputs, fn, quick_inputs, suite="matmul")
        self.gemms, self.quick_gemms = gemms, quick_gemms
        self.target, self.vendor = target, vendor

    def products(self, quick):
        return self.quick_gemms if quick else self.gemms

    def flops(self, quick):
        return sum(2 * m * n * k for m, n, k in self.products(quick))

    def weight_bytes(self, quick):
        """Bytes as the anchors count them: each product's operands and result, bf16."""
        return sum((m * k + k * n + m * n) * 2 for m, n, k in self.products(quick))

    def small_m(self, quick):
        return all(m <= 64 for m, _, _ in self.products(quick))


def concrete(shape, rows):
    return [rows if isinstance(d, Rows) else d for d in shape]


def long10(o, a, b):
    return {"y": o.tanh(o.exp(-a * a) * 0.5 + o.sin(a)) * o.sigmoid(b) - o.abs(a) + 0.1 * b}


def chain20(o, a, b):
    # 20 element-wise ops (constants are not ops).
    t = a * b                    # 1
    t = t + a                    # 2
    t = o.sin(t)                 # 3
    u = o.exp(-o.abs(b))         # 4, 5, 6
    t = t * u                    # 7
    t = t - 0.25 * a             # 8, 9
    t = o.tanh(t)                # 10
    v = o.sigmoid(a - b)         # 11, 12
    t = t + v                    # 13
    t = o.relu(t)                # 14
    t = t * t                    # 15
    w = o.cos(b)                 # 16
    t = t + 0.5 * w              # 17, 18
    t = o.silu(t)                # 19
    return {"y": t + a}          # 20


def int_where(o, a, b, m):
    return {"y": o.where(o.logical_and(m, o.gt(a, b)), a - b, b * 2)}


def three_outputs(o, x):
    return {"relu": o.relu(x), "sigmoid": o.sigmoid(x), "square": x * x}


def half_in_float_out(o, a, b):
    return {"y": o.tanh(o.cast(a, F32)) * o.cast(b, F32)}


def _ew(n, dt, names):
    return [(nm, dt, [n], "any") for nm in names]


def pointwise_cases():
    N, Q = 1 << 27, 1 << 21
    cases = []
    for dt in (F32, BF16):
        cases.append(Case(f"relu_fma_{dt}", _ew(N, dt, "abc"),
                          lambda o, a, b, c: {"y": o.relu(a * b + c)}, _ew(Q, dt, "abc")))
        cases.append(Case(f"silu_mul_{dt}", _ew(N, dt, "ab"),
                          lambda o, a, b: {"y": o.silu(a) * b}, _ew(Q, dt, "ab")))
        cases.append(Case(f"long10_{dt}", _ew(N, dt, "ab"), long10, _ew(Q, dt, "ab")))
    cases.append(Case("bias_gelu_tanh_bf16",
                      [("x", BF16, [32768, 4096], "any"), ("bias", BF16, [4096], "any")],
                      lambda o, x, bias: {"y": o.gelu_tanh(x + bias)},
                      [("x", BF16, [512, 4096], "any"), ("bias", BF16, [4096], "any")]))
    cases.append(Case("outer_add_f32",
                      [("a", F32, [16384, 1], "any"), ("b", F32, [1, 16384], "any")],
                      lambda o, a, b: {"y": a + b},
                      [("a", F32, [1024, 1], "any"), ("b", F32, [1, 1024], "any")]))
    cases.append(Case("f16_in_f32_out", _ew(N, F16, "ab"), half_in_float_out, _ew(Q, F16, "ab")))
    cases.append(Case("three_outputs_f32", _ew(N, F32, "x"), three_outputs, _ew(Q, F32, "x")))
    cases.append(Case("silu_mul_odd_f32", _ew(100_000_007, F32, "ab"),
                      lambda o, a, b: {"y": o.silu(a) * b}, _ew(1_000_003, F32, "ab")))
    cases.append(Case("chain20_bf16", _ew(N, BF16, "ab"), chain20, _ew(Q, BF16, "ab")))
    cases.append(Case("int_bool_where", [("a", I32, [N], "any"), ("b", I32, [N], "any"),
                                         ("m", BOOL, [N], "any")], int_where,
                      [("a", I32, [Q], "any"), ("b", I32, [Q], "any"), ("m", BOOL, [Q], "any")]))
    return cases


def row_cases():
    """Softmax, LayerNorm and RMSNorm (and residual add + RMSNorm) over rows
    of width W, about 128M elements each, the row count symbolic."""
    cases = []
    sweep_of = {("softmax", BF16, 4096), ("rms_norm", BF16, 4096), ("layer_norm", F32, 8192)}
    for dt in (BF16, F32):
        for op, widths in (("softmax", (1024, 4096, 5120, 8192, 50257)),
                           ("layer_norm", (1024, 4096, 5120, 8192)),
                           ("rms_norm", (1024, 4096, 5120, 8192)),
                           ("add_rms_norm", (4096,))):
            for w in widths:
                r = (1 << 27) // w
                sweep = (r - 1, r * 5 // 8, r * 3 // 2 + 1, 2 * r) if (op, dt, w) in sweep_of else ()
                if op == "softmax" and w == 50257:
                    # 2670 rows are 20.2 of a 132-SM GPU's persistent blocks'
                    # rows each; 2640 and 2772 are 20 and 21 whole rounds,
                    # which price the last partial round.
                    sweep = (2640, 2772)
                rows, quick = Rows(r, sweep), Rows(max(8, (1 << 21) // w) + 1)
                x = lambda R: ("x", dt, [R, w], "any")
                wt = ("weight", dt, [w], "any")
                if op == "softmax":
                    specs, fn = lambda R: [x(R)], lambda o, x: {"y": o.softmax(x)}
                elif op == "layer_norm":
                    specs = lambda R: [x(R), wt, ("bias", dt, [w], "any")]
                    fn = lambda o, x, wt, b: {"y": o.layer_norm(x, wt, b)}
                elif op == "rms_norm":
                    specs, fn = lambda R: [x(R), wt], lambda o, x, wt: {"y": o.rms_norm(x, wt)}
                else:
                    specs = lambda R: [x(R), ("residual", dt, [R, w], "any"), wt]
                    fn = lambda o, x, res, wt: dict(zip(("sum", "y"), o.add_rms_norm(x, res, wt)))
                cases.append(Case(f"{op}_{dt}_{w}", specs(rows), fn, specs(quick), suite="row"))
    return cases


def reduce_cases():
    """Reductions over outer axes, about 128M elements each: column sums, a
    mean over a sequence axis, and the plans of several kernels that centre
    columns, take a softmax down them, or standardize them before a softmax
    along rows."""
    R, W = 32768, 4096
    qR, qW = 512, 1000
    col = lambda dt, r, w: [("x", dt, [r, w], "any")]
    cases = [Case(f"column_sum_{dt}", col(dt, R, W), lambda o, x: {"y": o.sum_keep(x, [0])},
                  col(dt, qR, qW), suite="reduce") for dt in (BF16, F32)]
    cases.append(Case("sequence_mean_bf16", [("x", BF16, [32, 1024, W], "any")],
                      lambda o, x: {"y": o.mean_keep(x, [1])},
                      [("x", BF16, [4, 128, qW], "any")], suite="reduce"))
    cases.append(Case("center_columns_f32", col(F32, R, W),
                      lambda o, x: {"y": x - o.mean_keep(x, [0])}, col(F32, qR, qW),
                      suite="reduce"))
    cases.append(Case("softmax_axis0_bf16", col(BF16, R, W),
                      lambda o, x: {"y": o.softmax_axis(x, 0)}, col(BF16, qR, qW),
                      suite="reduce"))
    cases.append(Case("standardize_softmax_bf16", col(BF16, R, W), standardize_softmax,
                      col(BF16, qR, qW), suite="reduce"))
    logits = lambda r, w: [("x", BF16, [r, w], "any"), ("target", BF16, [r, w], "positive")]
    cases.append(Case("soft_target_loss_bf16", logits(R // 2, 2 * W), soft_target_loss,
                      logits(qR, qW), suite="reduce"))
    pair = lambda r, w: [("a", BF16, [r, w], "any"), ("b", BF16, [r, w], "any")]
    cases.append(Case("mse_loss_bf16", pair(R // 2, 2 * W),
                      lambda o, a, b: {"loss": o.mean_drop(o.square(a - b), [0, 1])},
                      pair(qR, qW), suite="reduce"))
    # F.cross_entropy with int64 class labels over a GPT-2 vocabulary.
    V, qV = 50257, 1003
    labeled = lambda r, v: [("x", BF16, [r, v], "any"), ("labels", I64, [r], f"labels:{v}")]
    cases.append(Case("cross_entropy_bf16", labeled((1 << 27) // V, V),
                      lambda o, x, t: {"loss": o.cross_entropy(x, t)}, labeled(qR, qV),
                      suite="reduce"))
    # The same loss as an ATen trace of it reaches a backend:
    # nll_loss_forward of _log_softmax, the pick of a computed value.
    cases.append(Case("nll_log_softmax_bf16", labeled((1 << 27) // V, V),
                      lambda o, x, t: {"loss": o.nll_log_softmax(x, t)}, labeled(qR, qV),
                      suite="reduce"))
    return cases


def standardize_softmax(o, x):
    """Columns standardized by their mean and variance over axis 0, then a
    softmax along rows: two reduction kernels and a row kernel reading both."""
    d = x - o.mean_keep(x, [0])
    return {"y": o.softmax(d * o.rsqrt(o.mean_keep(o.square(d), [0]) + 1e-5))}


def soft_target_loss(o, x, target):
    """The mean over rows of logsumexp(x) - sum(x * target), a scalar: a
    cross-entropy loss where each target row sums to 1 (here the targets are
    positive weights, not normalised; the work is the same). A row kernel
    stores the per-row max, sum of exps and target term; a kernel of one
    row, as wide as the batch, reduces the loss."""
    e = o.exp(x - o.max_keep(x, [-1]))
    lse = o.log(o.sum_drop(e, [-1])) + o.max_drop(x, [-1])
    return {"loss": o.mean_drop(lse - o.sum_drop(x * target, [-1]), [0])}


def gemm_bias_gelu(o, a, w, bias):
    return {"y": o.gelu_tanh(o.addmm(bias, a, w))}


def mlp(o, x, w1, b1, w2):
    return {"y": o.matmul(o.gelu_tanh(o.addmm(b1, x, w1)), w2)}


def router_softmax(o, a, w):
    return {"y": o.softmax(o.matmul(a, w))}


def matmul_cases():
    """GEMM + bias + tanh-GELU (a [M, K] @ w [K, N] + bias [N]) at few rows and
    square, and an MLP (x @ w1 + b1, tanh-GELU, @ w2), bf16, as
    shared/anchors measured them; and a router's softmax over the rows of a
    narrow product (a [M, K] @ w [K, 128]), which kfuse reduces in the
    product's epilogue, against torch.compile's product and softmax."""
    def gemm_specs(m, n, k):
        return [("a", BF16, [m, k], "any"), ("w", BF16, [k, n], "any"), ("bias", BF16, [n], "any")]

    def mlp_specs(t, d, f):
        return [("x", BF16, [t, d], "any"), ("w1", BF16, [d, f], "weight"),
                ("b1", BF16, [f], "any"), ("w2", BF16, [f, d], "weight")]

    def gemm_vendor(torch, a, w, bias):
        return torch._addmm_activation(bias, a, w, use_gelu=True)

    def mlp_vendor(torch, x, w1, b1, w2):
        return torch._addmm_activation(b1, x, w1, use_gelu=True) @ w2

    cases = []
    for name, (m, n, k), (qm, qn, qk), target in (
            ("gemm_bias_gelu_m1_bf16", (1, 8192, 8192), (1, 2048, 2048), ("cublaslt", 1.1)),
            ("gemm_bias_gelu_m16_bf16", (16, 8192, 8192), (16, 2048, 2048), ("cublaslt", 1.1)),
            ("gemm_bias_gelu_m64_bf16", (64, 8192, 8192), (64, 2048, 2048), ("cublaslt", 1.1)),
            ("gemm_bias_gelu_4096_bf16", (4096,) * 3, (1024,) * 3, ("cublaslt", 0.55)),
            ("gemm_bias_gelu_8192_bf16", (8192,) * 3, (2048,) * 3, ("cublaslt", 0.55))):
        cases.append(MatmulCase(name, gemm_specs(m, n, k), gemm_bias_gelu, gemm_specs(qm, qn, qk),
                                [(m, n, k)], [(qm, qn, qk)], target, gemm_vendor))
    (t, d, f), (qt, qd, qf) = (4096, 4096, 16384), (1024, 1024, 4096)
    cases.append(MatmulCase("mlp_gelu_bf16", mlp_specs(t, d, f), mlp, mlp_specs(qt, qd, qf),
                            [(t, f, d), (t, d, f)], [(qt, qf, qd), (qt, qd, qf)],
                            ("compile", 0.55), mlp_vendor))

    def router_specs(m, n, k):
        return [("a", BF16, [m, k], "any"), ("w", BF16, [k, n], "weight")]

    def router_vendor(torch, a, w):
        return torch.softmax(a @ w, -1)

    (m, n, k), (qm, qn, qk) = (32768, 128, 4096), (2048, 128, 1024)
    cases.append(MatmulCase("router_softmax_bf16", router_specs(m, n, k), router_softmax,
                            router_specs(qm, qn, qk), [(m, n, k)], [(qm, qn, qk)],
                            ("compile", 1.0), router_vendor))
    return cases


ATTN_TARGET = 0.9  # The least kfuse / SDPA-flash throughput ratio wanted.
ATTN_CASES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases", "attention")


class AttentionCase(Case):
    """Scaled dot-product attention, as torch's SDPA: q [B, H, Sq, D], k and v
    [B, Hkv, Sk, D] (bf16, Hkv dividing H: grouped-query heads), scale
    1/sqrt(D), optionally causal, optionally with `lengths` (an i32 input [B]:
    keys at or past a sequence's length are masked; a sequence of length 0
    gives rows of zeros). `dims` and `quick_dims`: (B, H, Hkv, Sq, Sk, D).

    The chain is kfuse.chain.attention's expansion, written to
    cases/attention/[quick/]<case>.json by cases/attention/make_cases.py
    (the client library, not the recorder below, builds it). `timed`: False
    for a correctness-only case; `sample`: (batch-head pairs, query rows per
    pair) the check draws, None for all."""

    def __init__(self, name, dims, quick_dims, causal, lengths=None, timed=True,
                 sample=(8, 64)):
        self.full_dims, self.quick_dims = tuple(dims), tuple(quick_dims)
        self.causal, self.timed, self.sample = causal, timed, sample
        self.lengths = tuple(lengths) if lengths is not None else None
        for b, h, hkv, _, _, _ in (self.full_dims, self.quick_dims):
            if h % hkv:
                raise ValueError(f"{name}: kv heads ({hkv}) must divide q heads ({h})")
            if self.lengths is not None and len(self.lengths) != b:
                raise ValueError(f"{name}: {len(self.lengths)} lengths for batch {b}")
        super().__init__(name, self._specs(self.full_dims), None, self._specs(self.quick_dims),
                         suite="attention")

    def _specs(self, dims):
        b, h, hkv, sq, sk, d = dims
        specs = [("q", BF16, [b, h, sq, d], "any"), ("k", BF16, [b, hkv, sk, d], "any"),
                 ("v", BF16, [b, hkv, sk, d], "any")]
        if self.lengths is not None:
            specs.append(("lengths", I32, [b], self.lengths))  # A tuple domain: these values.
        return specs

    def dims(self, quick):
        return self.quick_dims if quick else self.full_dims

    def flops(self, quick):
        return attention_flops(self.dims(quick), self.causal)

    def grouped(self, quick):
        _, h, hkv, _, _, _ = self.dims(quick)
        return h != hkv

    def chain_path(self, quick):
        return os.path.join(ATTN_CASES_DIR, "quick" if quick else "", self.name + ".json")


def attention_flops(dims, causal):
    """4 B H Sq Sk D (two products of 2 Sq Sk D a head), halved for a causal
    mask: the usual convention (FlashAttention's and shared/anchors'), which
    does not count the masked half."""
    b, h, _, sq, sk, d = dims
    return 4 * b * h * sq * sk * d // (2 if causal else 1)


def attention_cases():
    """The shapes shared/anchors measured SDPA at (h200-2026-11-29*.json):
    B4 H32 S4096 at D 128 and 64, B16 H32 S1024 D128 and B1 H32 S16384 D128,
    each causal and not, and grouped-query 32 q / 8 kv heads, B4 S4096 D128
    causal; and a small correctness-only case with padded keys (lengths, one
    of them 0) and grouped heads."""
    cases = []
    for (b, h, s, d), (qb, qh, qs) in (((4, 32, 4096, 128), (1, 8, 1024)),
                                       ((4, 32, 4096, 64), (1, 8, 1024)),
                                       ((16, 32, 1024, 128), (2, 8, 512)),
                                       ((1, 32, 16384, 128), (1, 4, 4096))):
        for causal in (False, True):
            name = f"attn_b{b}h{h}s{s}d{d}" + ("_causal" if causal else "") + "_bf16"
            cases.append(AttentionCase(name, (b, h, h, s, s, d), (qb, qh, qh, qs, qs, d), causal))
    cases.append(AttentionCase("attn_gqa_b4h32kv8s4096d128_causal_bf16", (4, 32, 8, 4096, 4096, 128),
                               (1, 8, 2, 1024, 1024, 128), causal=True))
    small = (4, 8, 2, 256, 384, 64)
    cases.append(AttentionCase("attn_lengths_b4h8kv2q256k384d64_bf16", small, small, causal=False,
                               lengths=(384, 300, 0, 77), timed=False, sample=(None, None)))
    return cases


def all_cases(suite=None):
    return [c for c in pointwise_cases() + row_cases() + matmul_cases() + attention_cases()
            + reduce_cases() if suite in (None, c.suite)]


# ---------------------------------------------------------------------------
# The chain JSON (kfuse.v1.Chain in the proto3 JSON mapping), by recording.

class Sym:
    def __init__(self, rec, ref, shape=None):
        self.rec, self.ref, self.shape = rec, ref, shape  # shape: inputs' only.

    def __add__(self, o): return self.rec.op("OP_ADD", self, o)
    def __radd__(self, o): return self.rec.op("OP_ADD", o, self)
    def __sub__(self, o): return self.rec.op("OP_SUB", self, o)
    def __rsub__(self, o): return self.rec.op("OP_SUB", o, self)
    def __mul__(self, o): return self.rec.op("OP_MUL", self, o)
    def __rmul__(self, o): return self.rec.op("OP_MUL", o, self)
    def __truediv__(self, o): return self.rec.op("OP_DIV", self, o)
    def __neg__(self): return self.rec.op("OP_NEG", self)


class Recorder:
    """The `ops` namespace that records a chain instead of computing."""
    UNARY = {"relu": "OP_RELU", "silu": "OP_SILU", "exp": "OP_EXP", "sin": "OP_SIN",
             "cos": "OP_COS", "tanh": "OP_TANH", "sigmoid": "OP_SIGMOID", "abs": "OP_ABS",
             "gelu_tanh": "OP_GELU_TANH", "rsqrt": "OP_RSQRT", "square": "OP_SQUARE",
             "log": "OP_LOG"}

    def __init__(self):
        self.ops = []

    def _arg(self, x):
        if isinstance(x, Sym):
            return x.ref
        self.ops.append({"kind": "OP_CONSTANT", "value": float(x)})  # A weak scalar.
        return {"op": len(self.ops) - 1}

    def op(self, kind, *args, dtype=None):
        refs = [self._arg(a) for a in args]
        o = {"kind": kind, "args": refs}
        if dtype:
            o["dtype"] = WIRE_DTYPE[dtype]
        self.ops.append(o)
        return Sym(self, {"op": len(self.ops) - 1})

    def __getattr__(self, name):
        if name in Recorder.UNARY:
            return lambda x: self.op(Recorder.UNARY[name], x)
        raise AttributeError(name)

    def where(self, c, a, b): return self.op("OP_WHERE", c, a, b)
    def gt(self, a, b): return self.op("OP_GT", a, b)
    def logical_and(self, a, b): return self.op("OP_LOGICAL_AND", a, b)
    def cast(self, x, dt): return self.op("OP_CAST", x, dtype=dt)
    def matmul(self, a, b): return self.op("OP_MATMUL", a, b)

    def addmm(self, bias, a, b):  # As torch.addmm: a @ b + bias.
        return self.matmul(a, b) + bias

    def reduce(self, kind, x, axes=(-1,), keepdim=True):  # Over the last axis by default.
        s = self.op(kind, x)
        self.ops[-1]["reduce"] = {"axes": list(axes), "keepdim": keepdim}
        return s

    def sum_keep(self, x, axes): return self.reduce("OP_REDUCE_SUM", x, axes)
    def mean_keep(self, x, axes): return self.reduce("OP_REDUCE_MEAN", x, axes)
    def max_keep(self, x, axes): return self.reduce("OP_REDUCE_MAX", x, axes)
    def sum_drop(self, x, axes): return self.reduce("OP_REDUCE_SUM", x, axes, keepdim=False)
    def mean_drop(self, x, axes): return self.reduce("OP_REDUCE_MEAN", x, axes, keepdim=False)
    def max_drop(self, x, axes): return self.reduce("OP_REDUCE_MAX", x, axes, keepdim=False)

    def softmax_axis(self, x, axis):
        e = self.exp(x - self.reduce("OP_REDUCE_MAX", x, [axis]))
        return e / self.reduce("OP_REDUCE_SUM", e, [axis])

    # The composites, as the client libraries expand them.
    def softmax(self, x):
        e = self.exp(x - self.reduce("OP_REDUCE_MAX", x))
        return e / self.reduce("OP_REDUCE_SUM", e)

    def layer_norm(self, x, weight, bias, eps=1e-5):
        d = x - self.reduce("OP_REDUCE_MEAN", x)
        return d * self.rsqrt(self.reduce("OP_REDUCE_MEAN", self.square(d)) + eps) * weight + bias

    def rms_norm(self, x, weight, eps=1e-6):
        return x * self.rsqrt(self.reduce("OP_REDUCE_MEAN", self.square(x)) + eps) * weight

    def add_rms_norm(self, x, residual, weight):
        s = x + residual
        return s, self.rms_norm(s, weight)

    def cross_entropy(self, x, labels):
        """F.cross_entropy of logits x [R, V] with i64 labels [R] (ignore_index
        -100), the mean over the rows not ignored, as kfuse.chain expands it."""
        lse = self.log(self.sum_drop(self.exp(x - self.max_keep(x, [-1])), [-1])) + self.max_drop(x, [-1])
        return self._mean_loss(labels, x.shape[-1], x, lambda picked: lse - picked)

    def nll_log_softmax(self, x, labels):
        """F.nll_loss(F.log_softmax(x, -1), labels) as an ATen trace has it:
        log_softmax computed in x's dtype, then its value at the label picked."""
        d = x - self.max_keep(x, [-1])
        logp = d - self.log(self.sum_keep(self.exp(d), [-1]))
        return self._mean_loss(labels, x.shape[-1], logp, lambda picked: -picked)

    def _mean_loss(self, labels, width, x, loss_of):
        """loss_of(x[label]) per row (the label picks its element of x's rows
        of `width` through an iota along them), 0 where the label is
        ignore_index -100; the mean over the rows not ignored."""
        label = self.cast(labels, I32)
        column = self.op("OP_RESHAPE", label)
        self.ops[-1]["shape"] = {"shape": [wire_dim(d) for d in labels.shape] + [wire_dim(1)]}
        self.ops.append({"kind": "OP_IOTA", "dtype": WIRE_DTYPE[I32],
                         "shape": {"shape": [wire_dim(width)]}, "axis": {"axis": 0}})
        iota = Sym(self, {"op": len(self.ops) - 1})
        picked = self.sum_drop(self.where(self.op("OP_EQ", iota, column), x, 0), [-1])
        kept = self.op("OP_NE", label, -100)
        loss = self.cast(self.where(kept, loss_of(picked), 0), F32)
        return self.cast(self.sum_drop(loss, [0]) / self.sum_drop(self.cast(kept, F32), [0]), BF16)


def wire_dim(d):
    return {"symbol": "rows", "hint": str(d.hint)} if isinstance(d, Rows) else {"size": str(d)}


def chain_json(case, quick):
    rec = Recorder()
    specs = case.specs(quick)
    syms = [Sym(rec, {"input": i}, shape) for i, (_, _, shape, _) in enumerate(specs)]
    outs = case.fn(rec, *syms)
    return {
        "inputs": [{"name": nm, "dtype": WIRE_DTYPE[dt], "shape": [wire_dim(d) for d in shape]}
                   for nm, dt, shape, _ in specs],
        "ops": rec.ops,
        "outputs": [{"name": k, "value": v.ref} for k, v in outs.items()],
    }


def write_cases(out_dir, quick):
    """DIR/<suite>/<case>.json; beside each case with symbolic rows,
    <case>.rows lists the row counts to run it at (the tuned one first)."""
    for case in all_cases():
        d = os.path.join(out_dir, case.suite)
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, case.name + ".json")
        if isinstance(case, AttentionCase):  # Built by the client library: copied.
            src = case.chain_path(quick)
            if not os.path.exists(src):
                raise FileNotFoundError(f"{src} is missing: run bench/gpu/cases/attention/make_cases.py")
            if not (os.path.exists(dst) and os.path.samefile(src, dst)):
                shutil.copyfile(src, dst)
            continue
        with open(dst, "w") as f:
            json.dump(chain_json(case, quick), f, indent=1)
            f.write("\n")
        rows = case.rows(quick)
        if rows:
            with open(os.path.join(d, case.name + ".rows"), "w") as f:
                f.write(" ".join(str(r) for r in (rows.hint,) + rows.sweep) + "\n")
    print(f"wrote {len(all_cases())} chains to {out_dir}")


# ---------------------------------------------------------------------------
# Everything below runs on the GPU machine only.

def torch_ops(torch, F, reference):
    """The `ops` namespace over torch tensors; `reference`: float64 except casts."""
    dt = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16, I32: torch.int32,
          I64: torch.int64, BOOL: torch.bool}

    class Ops:
        relu = staticmethod(torch.relu)
        silu = staticmethod(F.silu)
        exp = staticmethod(torch.exp)
        log = staticmethod(torch.log)
        rsqrt = staticmethod(torch.rsqrt)
        square = staticmethod(torch.square)
        sin = staticmethod(torch.sin)
        cos = staticmethod(torch.cos)
        tanh = staticmethod(torch.tanh)
        sigmoid = staticmethod(torch.sigmoid)
        abs = staticmethod(torch.abs)
        where = staticmethod(torch.where)
        gt = staticmethod(torch.gt)
        logical_and = staticmethod(torch.logical_and)
        matmul = staticmethod(torch.matmul)
        addmm = staticmethod(torch.addmm)

        @staticmethod
        def gelu_tanh(x):
            return F.gelu(x, approximate="tanh")

        @staticmethod
        def softmax(x):
            return torch.softmax(x, -1)

        @staticmethod
        def softmax_axis(x, axis):
            return torch.softmax(x, axis)

        @staticmethod
        def sum_keep(x, axes):
            return torch.sum(x, dim=axes, keepdim=True)

        @staticmethod
        def mean_keep(x, axes):
            return torch.mean(x, dim=axes, keepdim=True)

        @staticmethod
        def max_keep(x, axes):
            return torch.amax(x, dim=axes, keepdim=True)

        @staticmethod
        def sum_drop(x, axes):
            return torch.sum(x, dim=axes)

        @staticmethod
        def mean_drop(x, axes):
            return torch.mean(x, dim=axes)

        @staticmethod
        def max_drop(x, axes):
            return torch.amax(x, dim=axes)

        @staticmethod
        def layer_norm(x, weight, bias):
            return F.layer_norm(x, (x.shape[-1],), weight, bias, 1e-5)

        @staticmethod
        def rms_norm(x, weight):
            return F.rms_norm(x, (x.shape[-1],), weight, 1e-6)

        @staticmethod
        def add_rms_norm(x, residual, weight):
            s = x + residual
            return s, F.rms_norm(s, (s.shape[-1],), weight, 1e-6)

        @staticmethod
        def cross_entropy(x, labels):
            return F.cross_entropy(x, labels)

        @staticmethod
        def nll_log_softmax(x, labels):
            return F.nll_loss(F.log_softmax(x, -1), labels)

        @staticmethod
        def cast(x, to):
            y = x.to(dt[to])  # An explicit cast rounds, in the reference too.
            return y.to(torch.float64) if reference and y.is_floating_point() else y

    return Ops, dt


def make_inputs(torch, case, quick, dt, seed, rows=None):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    out = []
    for _, d, shape, domain in case.specs(quick):
        shape = concrete(shape, rows)
        if isinstance(domain, tuple):  # Given values (attention's lengths).
            t = torch.tensor(domain, dtype=dt[d], device="cuda").reshape(shape)
        elif d == BOOL:
            t = torch.rand(shape, device="cuda", generator=g) < 0.5
        elif domain.startswith("labels:"):  # Class labels, every tenth ignore_index (-100).
            t = torch.randint(0, int(domain[7:]), shape, device="cuda", generator=g, dtype=dt[d])
            t[::10] = -100
        elif d == I32:
            t = torch.randint(-100, 101, shape, device="cuda", generator=g, dtype=torch.int32)
        elif domain == "positive":
            t = (torch.rand(shape, device="cuda", generator=g) * 3.9 + 0.1).to(dt[d])
        elif domain == "weight":
            t = (torch.randn(shape, device="cuda", generator=g) * 0.02).to(dt[d])
        else:
            t = torch.randn(shape, device="cuda", generator=g).to(dt[d])
        out.append(t)
    return out


EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
MATMUL_SAMPLE_ROWS = 64  # Rows of a matmul case's output checked against float64.


def check(torch, got, ref, eager, slack=2.0, yardstick="eager"):
    """(ok, max err, tolerance, message) for one output: `eager` is the
    yardstick (its error against `ref`, times `slack`, plus 4 eps max|ref|,
    is the tolerance), named `yardstick` in the message."""
    if not got.is_floating_point():
        bad = (got != eager.to(got.dtype)).sum().item()
        return bad == 0, float(bad), 0.0, f"{bad} elements differ from eager"
    g, r, e = got.double(), ref.double(), eager.double()
    fin = torch.isfinite(g) & torch.isfinite(r)
    special = ((torch.isnan(g) != torch.isnan(r)) | (torch.isinf(g) != torch.isinf(r)) |
               (torch.isinf(g) & torch.isinf(r) & (torch.sign(g) != torch.sign(r)))).sum().item()
    err = (g - r).abs().where(fin, torch.zeros_like(g)).max().item()
    efin = torch.isfinite(e) & torch.isfinite(r)
    eager_err = (e - r).abs().where(efin, torch.zeros_like(e)).max().item()
    max_ref = r.abs().where(torch.isfinite(r), torch.zeros_like(r)).max().item()
    tol = slack * eager_err + 4 * EPS[str(got.dtype).replace("torch.", "")] * max_ref
    ok = special == 0 and err <= tol
    msg = f"max err {err:.3g} ({yardstick} {eager_err:.3g}, tol {tol:.3g})"
    if special:
        msg += f", {special} NaN/inf positions differ"
    return ok, err, tol, msg


ATTN_SAMPLE_SEED = 4321


def attention_samples(dims, seed, pairs=8, rows=64):
    """[(batch, head, [query rows])] to check: `pairs` (batch, head) pairs drawn
    at random without repeats, each with `rows` query rows (the first and the
    last always among them, as causal masks differ most there); all pairs or
    all rows where there are no more than asked, or it is None."""
    b, h, _, sq, _, _ = dims
    rng = random.Random(seed)
    every = [(i, j) for i in range(b) for j in range(h)]
    chosen = every if pairs is None or len(every) <= pairs else sorted(rng.sample(every, pairs))
    out = []
    for i, j in chosen:
        if rows is None or sq <= rows:
            r = list(range(sq))
        else:
            r = sorted({0, sq - 1} | set(rng.sample(range(1, sq - 1), rows - 2)))
        out.append((i, j, r))
    return out


def attention_allowed(torch, rows, sk, causal, length, device):
    """bool [len(rows), sk]: which keys each of these query rows attends to
    (causal: key <= row, aligned at the start; length: key < length)."""
    r = torch.tensor(rows, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    allowed = torch.ones(len(rows), sk, dtype=torch.bool, device=device)
    if causal:
        allowed &= j <= r
    if length is not None:
        allowed &= j < length
    return allowed


def attention_reference(torch, q, k, v, scale, allowed):
    """float64 softmax(q k^T scale, masked) v for q [R, D], k [Sk, D], v [Sk, Dv];
    a row with no allowed key is zeros (as SDPA and the chain give)."""
    s = (q.double() @ k.double().T) * scale
    s = s.masked_fill(~allowed, -math.inf)
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isinf(m), torch.zeros_like(m), m))
    z = e.sum(-1, keepdim=True)
    return (e / torch.where(z > 0, z, torch.ones_like(z))) @ v.double()


def attention_expected(torch, F, case, quick, inputs, samples):
    """(float64 reference, SDPA math backend's output, rows with no key) on
    the sampled rows, each [sum of rows, ...] in `samples` order; the math
    backend runs on the same bf16 inputs with the mask written out."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    _, h, hkv, _, sk, d = case.dims(quick)
    q, k, v = inputs[:3]
    lengths = inputs[3].tolist() if len(inputs) > 3 else None
    scale = 1.0 / math.sqrt(d)
    refs, maths, empty = [], [], []
    for b, hq, rows in samples:
        hk = hq // (h // hkv)
        allowed = attention_allowed(torch, rows, sk, case.causal,
                                    None if lengths is None else lengths[b], q.device)
        qs, ks, vs = q[b, hq, rows], k[b, hk], v[b, hk]
        refs.append(attention_reference(torch, qs, ks, vs, scale, allowed))
        with sdpa_kernel(SDPBackend.MATH):
            maths.append(F.scaled_dot_product_attention(qs[None, None], ks[None, None], vs[None, None],
                                                        attn_mask=allowed[None, None],
                                                        scale=scale)[0, 0])
        empty.append(~allowed.any(-1))
    return torch.cat(refs), torch.cat(maths), torch.cat(empty)


def attention_gather(torch, out, samples):
    """out [B, H, Sq, Dv]'s sampled rows, [sum of rows, Dv]."""
    return torch.cat([out[b, h, rows] for b, h, rows in samples])


def attention_verdict(torch, got, ref, math_out, empty):
    """(ok, message): kfuse's sampled rows against float64, with the SDPA
    math backend's error as the yardstick (at most 2 x its error + 4 eps(bf16)
    max|ref|, NaN/inf positions as the reference's), and every row with no
    key to attend to exactly zero."""
    ok, _, _, msg = check(torch, got, ref, math_out, yardstick="SDPA math")
    n = int(empty.sum().item())
    if n:
        stray = int((got[empty] != 0).sum().item())  # NaN counts: NaN != 0.
        msg += f"; {n} rows with no key, {stray} nonzero values in them"
        ok = ok and stray == 0
    return ok, msg + f" on {got.shape[0]} rows"


def attention_unfused(torch, case, quick, device="cuda"):
    """The chain as separate eager ops, as shared/anchors' unfused attention:
    q k^T, the scale, the causal mask (built once, outside), softmax in f32,
    back to bf16, p v; grouped queries through [B, Hkv, G, S, D] views that
    the products broadcast."""
    b, h, hkv, sq, sk, d = case.dims(quick)
    g, scale = h // hkv, 1.0 / math.sqrt(d)
    blocked = (torch.ones(sq, sk, dtype=torch.bool, device=device).triu(1)
               if case.causal else None)

    def unfused(q, k, v):
        if g > 1:
            q, k, v = q.view(b, hkv, g, sq, d), k.unsqueeze(2), v.unsqueeze(2)
        s = q @ k.transpose(-1, -2)
        s = s * scale
        if blocked is not None:
            s = s.masked_fill(blocked, -math.inf)
        p = torch.softmax(s.float(), -1).to(q.dtype)
        o = p @ v
        return o.reshape(b, h, sq, o.shape[-1]) if g > 1 else o

    return unfused


def attention_unfused_bytes(case, quick):
    """Device memory the unfused eager chain peaks at, about: bf16 scores,
    a scaled (or masked) copy, the f32 scores and their softmax."""
    b, h, _, sq, sk, _ = case.dims(quick)
    return b * h * sq * sk * (2 + 2 + 4 + 4)


class KfuseLauncher:
    """Loads a manifest's cubins and launches them on torch's current stream:
    every kernel of the plan in order, over one allocation per intermediate
    (shared by the kernel that writes it and those that read it) and one per
    workspace parameter (zeroed before each launch when the plan says so, by
    cuMemsetD8Async on the same stream as clients/launcher.cc does)."""

    def __init__(self, torch, cu, manifest_path):
        self.torch, self.cu = torch, cu
        with open(manifest_path) as f:
            self.m = json.load(f)
        base = os.path.dirname(manifest_path)
        self.kernels = []
        for k in self.m["kernels"]:
            if any(p["kind"] == "tensor_map" for p in k["params"]):
                raise RuntimeError("tensor-map parameters are not supported by this benchmark")
            if any(c > 1 for c in k.get("cluster", ())):
                raise RuntimeError(f"{k['entry']}: cluster launches are not supported by this benchmark")
            with open(os.path.join(base, k["cubin"]), "rb") as f:
                image = f.read()
            module = self._ok(cu.cuModuleLoadData(image), "cuModuleLoadData")
            fn = self._ok(cu.cuModuleGetFunction(module, k["entry"].encode()), "cuModuleGetFunction")
            if k["smem"] > 48 * 1024:
                attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                self._ok(cu.cuFuncSetAttribute(fn, attr, k["smem"]), "cuFuncSetAttribute")
            self.kernels.append((k, module, fn))

    def _ok(self, res, what):
        err, rest = (res[0], res[1:]) if isinstance(res, tuple) else (res, ())
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what}: {err}")
        return rest[0] if len(rest) == 1 else rest

    def bind(self, inputs, outputs):
        """A zero-argument launch function over these tensors (kept alive)."""
        torch, cu = self.torch, self.cu
        mids = [torch.empty(max(n, 1), dtype=torch.uint8, device="cuda")
                for n in self.m["intermediate_bytes"]]
        launches, keep = [], [inputs, outputs, mids]
        for k, _, fn in self.kernels:
            if k["empty"]:
                continue
            vals, zero = [], []
            for p in k["params"]:
                kind = p["kind"]
                if kind in ("input", "output", "intermediate"):
                    bufs = {"input": inputs, "output": outputs, "intermediate": mids}[kind]
                    if not 0 <= p["index"] < len(bufs):
                        raise RuntimeError(f"{k['entry']}: {kind} {p['index']} of {len(bufs)}")
                    vals.append(ctypes.c_uint64(bufs[p["index"]].data_ptr()))
                elif kind == "scalar":
                    vals.append((ctypes.c_int32 if p["dtype"] == "i32" else ctypes.c_int64)(p["value"]))
                elif kind == "workspace":
                    w = torch.empty(max(p["bytes"], 1), dtype=torch.uint8, device="cuda")
                    keep.append(w)
                    if p["zeroed"]:  # As the launcher (clients/launcher.cc): a memset node.
                        zero.append((cu.CUdeviceptr(w.data_ptr()), w.numel()))
                    vals.append(ctypes.c_uint64(w.data_ptr()))
            ptrs = (ctypes.c_void_p * max(len(vals), 1))(*[ctypes.addressof(v) for v in vals])
            keep += [vals, ptrs]
            launches.append((fn, k["grid"], k["block"], k["smem"], ctypes.addressof(ptrs), zero))

        def run():
            stream = cu.CUstream(torch.cuda.current_stream().cuda_stream)
            for fn, g, b, smem, args, zero in launches:
                for ptr, n in zero:
                    err, = cu.cuMemsetD8Async(ptr, 0, n, stream)
                    if err != cu.CUresult.CUDA_SUCCESS:
                        raise RuntimeError(f"cuMemsetD8Async: {err}")
                err, = cu.cuLaunchKernel(fn, g[0], g[1], g[2], b[0], b[1], b[2], smem, stream, args, 0)
                if err != cu.CUresult.CUDA_SUCCESS:
                    raise RuntimeError(f"cuLaunchKernel: {err}")

        run.keep = keep
        return run


def bench(args):
    import torch
    import torch.nn.functional as F
    from triton.testing import do_bench
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        from cuda import cuda as cu

    def timed(fn):  # As shared/anchors/anchors.py measures.
        fn()
        torch.cuda.synchronize()
        return do_bench(fn, warmup=25, rep=150, return_mode="median")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.init()
    torch.empty(1, device="cuda")  # The primary context, current on this thread.
    cu.cuInit(0)
    device = torch.cuda.get_device_name()
    print(torch.__version__, device, flush=True)
    rows, records = [], []

    def rec(case, impl, ms, nbytes, extra=None, flops=None):
        r = {"case": case, "impl": impl, "ms": round(ms, 4), "GBps": round(nbytes / ms / 1e6, 1)}
        if flops:
            r["TFLOPs"] = round(flops / ms / 1e9, 1)
        r.update(extra or {})
        records.append(r)
        print(json.dumps(r), flush=True)
        return r

    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    copy = rec("copy_1GiB", "torch copy_", timed(lambda: y.copy_(x)), 2 * x.numel())
    del x, y
    torch.cuda.empty_cache()

    eager_ops, dt = torch_ops(torch, F, reference=False)
    ref_ops, _ = torch_ops(torch, F, reference=True)

    def load(i, case, path, nrows):
        """The manifest's launcher bound to fresh inputs and NaN-filled outputs."""
        launcher = KfuseLauncher(torch, cu, path)
        m = launcher.m
        inputs = make_inputs(torch, case, args.quick, dt, seed=1234 + i, rows=nrows)
        want = [(list(t["shape"]), t["dtype"]) for t in m["inputs"]]
        have = [(list(t.shape), d) for t, (_, d, _, _) in zip(inputs, case.specs(args.quick))]
        if want != have:  # A kernel launched on other shapes reads out of bounds.
            raise RuntimeError(f"{case.name}: the plan is for inputs {want}, the case has {have} "
                               "(--quick on one step and not the other?)")
        outputs = [torch.empty(o["shape"], dtype=dt[o["dtype"]], device="cuda") for o in m["outputs"]]
        for o in outputs:
            if o.is_floating_point():
                o.fill_(float("nan"))
        return launcher, inputs, outputs, launcher.bind(inputs, outputs)

    def eager_of(case):
        def eager_fn(*xs):
            return tuple(case.fn(eager_ops, *xs).values())
        return eager_fn

    def compiled(label, fn, inputs, nbytes, flops=None):
        t0 = time.time()
        cf = torch.compile(fn, dynamic=False)
        cf(*inputs)
        torch.cuda.synchronize()
        r = rec(label, "torch.compile", timed(lambda: cf(*inputs)), nbytes,
                {"compile_s": round(time.time() - t0, 1)}, flops)
        del cf
        return r

    def same_bytes_copy(nbytes):
        """A copy of nbytes / 2 bytes (nbytes read + written), timed as the
        kernels are: what a copy reaches at the case's size, where the 1 GiB
        copy's figure is the device's."""
        x = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
        y = torch.empty_like(x)
        ms = timed(lambda: y.copy_(x))
        del x, y
        torch.cuda.empty_cache()
        return round(2 * (nbytes // 2) / ms / 1e6, 1)

    def measure(i, case, path, nrows, anchors):
        """Checks and times one manifest; with `anchors`, eager and
        torch.compile on the same inputs too."""
        launcher, inputs, outputs, run = load(i, case, path, nrows)
        m = launcher.m
        nbytes = sum(t.numel() * t.element_size() for t in inputs + outputs)
        eager_fn = eager_of(case)

        # Correctness first: kfuse against float64, eager as the yardstick.
        run()
        torch.cuda.synchronize()
        eager_out = eager_fn(*inputs)
        ref_in = [t.double() if t.is_floating_point() else t for t in inputs]
        ref_out = tuple(case.fn(ref_ops, *ref_in).values())
        verdicts = [check(torch, g, r, e) for g, r, e in zip(outputs, ref_out, eager_out)]
        ok = all(v[0] for v in verdicts)
        del eager_out, ref_out, ref_in
        torch.cuda.empty_cache()
        label = case.name if nrows is None else f"{case.name}@{nrows}"
        row = {"case": label, "name": case.name, "bytes": nbytes, "state": m["state"], "correct": ok,
               "failed_trials": m.get("failed_trials", {}),
               "check": "; ".join(v[3] for v in verdicts), "copy_GBps": copy["GBps"],
               "tuner_ms": m["report"]["measured_seconds"] * 1e3,
               "bound": m["report"]["bound"].replace("BOUND_", "").lower(),
               "predicted_ms": m["report"]["predicted_seconds"] * 1e3}
        row["kfuse"] = rec(label, "kfuse", timed(run), nbytes,
                           {"state": m["state"], "variant": ";".join(k["variant"] for k in m["kernels"]),
                            "correct": ok, "check": [v[3] for v in verdicts]})
        row["variant"] = row["kfuse"]["variant"]
        row["copy_same_GBps"] = same_bytes_copy(nbytes)
        if anchors:
            row["eager"] = rec(label, "eager", timed(lambda: eager_fn(*inputs)), nbytes)
            row["compile"] = compiled(label, eager_fn, inputs, nbytes)
        del inputs, outputs, run, launcher
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        return row

    def measure_matmul(i, case, path):
        """Checks one matmul manifest on sampled rows and times it beside
        cuBLASLt's fused epilogue, eager and torch.compile."""
        launcher, inputs, outputs, run = load(i, case, path, None)
        m = launcher.m
        nbytes, flops = case.weight_bytes(args.quick), case.flops(args.quick)
        eager_fn = eager_of(case)
        vendor = lambda: case.vendor(torch, *inputs)  # noqa: E731

        # Correctness on sampled rows of input 0 (the output's rows): float64
        # over those rows only, against the same rows of kfuse's and eager's
        # full outputs; cuBLASLt's error is reported beside them.
        run()
        torch.cuda.synchronize()
        g = torch.Generator(device="cuda")
        g.manual_seed(4321 + i)
        M = inputs[0].shape[0]
        idx = torch.randperm(M, device="cuda", generator=g)[:MATMUL_SAMPLE_ROWS].sort().values
        ref_in = [t[idx].double() if j == 0 else t.double() for j, t in enumerate(inputs)]
        ref_out = tuple(case.fn(ref_ops, *ref_in).values())
        del ref_in
        eager_out = eager_fn(*inputs)
        verdicts = [check(torch, o[idx], r, e[idx]) for o, r, e in zip(outputs, ref_out, eager_out)]
        del eager_out
        ok = all(v[0] for v in verdicts)
        msg = "; ".join(v[3] for v in verdicts) + f" on {idx.numel()} of {M} rows"
        try:
            vout = vendor()
            verr = (vout[idx].double() - ref_out[0]).abs().nan_to_num(float("inf")).max().item()
            msg += f"; cuBLASLt err {verr:.3g}"
            del vout
        except Exception as e:  # Reported in the row; the timing is skipped below too.
            msg += f"; cuBLASLt: {type(e).__name__}: {str(e)[:120]}"
        del ref_out
        torch.cuda.empty_cache()

        compile_s = None
        cpath = os.path.join(args.manifests, case.name + ".compile_s")
        if os.path.exists(cpath):
            with open(cpath) as f:
                compile_s = float(f.read().split()[0])
        row = {"case": case.name, "name": case.name, "gemms": case.products(args.quick),
               "flops": flops, "bytes": nbytes, "small_m": case.small_m(args.quick),
               "target": list(case.target), "state": m["state"], "reason": m.get("reason", ""),
               "trials": m.get("trials", 0), "tuning_s": m.get("tuning_seconds", 0.0),
               "failed_trials": m.get("failed_trials", {}),
               "compile_s": compile_s, "kernels": len(m["kernels"]), "correct": ok, "check": msg,
               "copy_GBps": copy["GBps"]}
        row["kfuse"] = rec(case.name, "kfuse", timed(run), nbytes,
                           {"state": m["state"], "variant": ";".join(k["variant"] for k in m["kernels"]),
                            "correct": ok, "check": msg}, flops)
        row["variant"] = row["kfuse"]["variant"]
        try:
            row["cublaslt"] = rec(case.name, "cuBLASLt epilogue", timed(vendor), nbytes, None, flops)
        except Exception as e:
            print(f"{case.name}: no cuBLASLt epilogue: {e!r}"[:300], flush=True)
            row["cublaslt"] = None
        row["eager"] = rec(case.name, "eager", timed(lambda: eager_fn(*inputs)), nbytes, None, flops)
        row["compile"] = compiled(case.name, eager_fn, inputs, nbytes, flops)
        del inputs, outputs, run, launcher
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        return row

    def attention_baseline(row, key, label, fn, ctx=None, flops=None, nbytes=0):
        """Times one baseline into row[key]; a failure (no kernel for the
        shape, out of memory) is recorded in row["skipped"] instead."""
        try:
            if ctx is None:
                row[key] = rec(row["case"], label, timed(fn), nbytes, None, flops)
            else:
                with ctx():
                    row[key] = rec(row["case"], label, timed(fn), nbytes, None, flops)
        except Exception as e:  # noqa: BLE001 (each baseline stands alone)
            row["skipped"][key] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
            print(f"{row['case']}: {label}: {row['skipped'][key]}", flush=True)
            torch.cuda.empty_cache()

    def measure_attention(i, case, path):
        """Checks kfuse's attention kernel on sampled rows against float64
        (SDPA's math backend the yardstick), then times it beside SDPA with
        the flash backend forced, SDPA's own choice, the unfused eager chain
        and its torch.compile. Without a kernel (no manifest, a refused one),
        the baselines are still measured."""
        from torch.nn.attention import SDPBackend, sdpa_kernel
        dims = case.dims(args.quick)
        b, h, hkv, sq, sk, d = dims
        flops = case.flops(args.quick)
        nbytes = 2 * (2 * b * h * sq * d + 2 * b * hkv * sk * d)  # q, k, v read, out written.
        compile_s = None
        cpath = os.path.join(args.manifests, case.name + ".compile_s")
        if os.path.exists(cpath):
            with open(cpath) as f:
                compile_s = float(f.read().split()[0])
        row = {"case": case.name, "name": case.name, "dims": list(dims), "causal": case.causal,
               "lengths": list(case.lengths) if case.lengths else None, "timed": case.timed,
               "flops": flops, "bytes": nbytes, "target": ["flash", ATTN_TARGET], "state": "",
               "reason": "", "trials": 0, "tuning_s": 0.0, "compile_s": compile_s, "kernels": 0,
               "variant": "", "correct": False, "check": "", "kfuse_error": "", "kfuse": None,
               "flash": None, "default": None, "eager": None, "compile": None, "skipped": {}}
        run = outputs = None
        try:
            if not os.path.exists(path):
                raise RuntimeError(f"no manifest at {path}")
            launcher, inputs, outputs, run = load(i, case, path, None)
            m = launcher.m
            row.update(state=m["state"], reason=m.get("reason", ""), trials=m.get("trials", 0),
                       tuning_s=m.get("tuning_seconds", 0.0), failed_trials=m.get("failed_trials", {}),
                       kernels=len(m["kernels"]),
                       variant=";".join(k["variant"] for k in m["kernels"]))
        except RuntimeError as e:  # The baselines still run.
            row["kfuse_error"] = str(e)[:300]
            row["check"] = f"no kfuse kernel: {row['kfuse_error']}"
            print(f"{case.name}: {row['check']}", flush=True)
            inputs = make_inputs(torch, case, args.quick, dt, seed=1234 + i)
        q, k, v = inputs[:3]

        pairs, nrows = case.sample
        samples = attention_samples(dims, ATTN_SAMPLE_SEED + i, pairs, nrows)
        ref, math_out, empty = attention_expected(torch, F, case, args.quick, inputs, samples)
        if run is not None:
            try:
                run()
                torch.cuda.synchronize()
                got = attention_gather(torch, outputs[0], samples)
                row["correct"], row["check"] = attention_verdict(torch, got, ref, math_out, empty)
                del got
            except RuntimeError as e:  # A failed launch; the baselines still run.
                row["kfuse_error"] = str(e)[:300]
                row["check"] = f"kfuse launch failed: {row['kfuse_error']}"
                run = None
        print(f"{case.name}: {'ok' if row['correct'] else 'WRONG'}: {row['check']}", flush=True)

        if case.timed:
            kw = {"is_causal": case.causal}
            if case.grouped(args.quick):
                kw["enable_gqa"] = True
            sdpa = lambda: F.scaled_dot_product_attention(q, k, v, **kw)  # noqa: E731
            flash = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)  # noqa: E731
            try:
                with flash():
                    fo = sdpa()
                ferr = (attention_gather(torch, fo, samples).double() - ref).abs().max().item()
                row["check"] += f"; SDPA flash err {ferr:.3g}"
                del fo
            except Exception as e:  # noqa: BLE001 (timed below; the failure is recorded there)
                print(f"{case.name}: SDPA flash: {e!r}"[:300], flush=True)
            if run is not None:
                row["kfuse"] = rec(case.name, "kfuse", timed(run), nbytes,
                                   {"state": row["state"], "variant": row["variant"],
                                    "correct": row["correct"], "check": row["check"]}, flops)
            attention_baseline(row, "flash", "SDPA flash", sdpa, flash, flops, nbytes)
            attention_baseline(row, "default", "SDPA default", sdpa, None, flops, nbytes)
            unfused = attention_unfused(torch, case, args.quick)
            need, free = attention_unfused_bytes(case, args.quick), torch.cuda.mem_get_info()[0]
            if need > 0.9 * free:
                why = f"needs about {need / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free"
                row["skipped"]["eager"] = why
                print(f"{case.name}: unfused eager: skipped, {why}", flush=True)
            else:
                attention_baseline(row, "eager", "eager (unfused)", lambda: unfused(q, k, v), None,
                                   flops, nbytes)
            try:
                row["compile"] = compiled(case.name, unfused, [q, k, v], nbytes, flops)
            except Exception as e:  # noqa: BLE001
                row["skipped"]["compile"] = f"{type(e).__name__}: {str(e)[:160]}"
                print(f"{case.name}: torch.compile: {row['skipped']['compile']}", flush=True)
        del inputs, outputs, run, ref, math_out
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        return row

    only = set(args.cases.split(",")) if args.cases else None
    sweeps, failed = [], []
    for i, case in enumerate(all_cases(args.suite)):
        if only and case.name not in only:
            continue
        path = os.path.join(args.manifests, case.name + ".json")
        if isinstance(case, AttentionCase):  # Measured with or without a manifest.
            try:
                rows.append(measure_attention(i, case, path))
                if not rows[-1]["correct"]:
                    failed.append(case.name)
            except RuntimeError as e:  # The other cases still run.
                print(f"FAILED {case.name}: {e}", flush=True)
                failed.append(case.name)
                torch._dynamo.reset()
                torch.cuda.empty_cache()
            write_results(args, device, copy, rows, records, sweeps, quiet=True)
            continue
        if not os.path.exists(path):
            print(f"skip {case.name}: no manifest at {path}", flush=True)
            continue
        if isinstance(case, MatmulCase):
            try:
                rows.append(measure_matmul(i, case, path))
            except RuntimeError as e:  # A refused manifest or a failed launch; the others still run.
                print(f"FAILED {case.name}: {e}", flush=True)
                failed.append(case.name)
                torch._dynamo.reset()
                torch.cuda.empty_cache()
            write_results(args, device, copy, rows, records, sweeps, quiet=True)
            continue
        crows = case.rows(args.quick)
        rows.append(measure(i, case, path, crows and crows.hint, anchors=True))
        if crows and crows.sweep:
            sweep = {"case": case.name, "tuned_rows": crows.hint, "points": []}
            for n in crows.sweep:
                p = os.path.join(args.manifests, f"{case.name}@{n}.json")
                if os.path.exists(p):
                    sweep["points"].append(measure(i, case, p, n, anchors=False))
            sweeps.append(sweep)
        write_results(args, device, copy, rows, records, sweeps, quiet=True)  # A cut-off run keeps its rows.

    write_results(args, device, copy, rows, records, sweeps)
    if failed:
        print(f"failed: {', '.join(failed)}")
    every = rows + [p for sw in sweeps for p in sw["points"]]
    return 0 if every and not failed and all(r["correct"] for r in every) else 1


TUNING_TARGET_S = 10  # Compile + tune wall seconds per GEMM shape.
BASELINE_NAME = {"cublaslt": "cuBLASLt", "compile": "torch.compile"}


def state_text(r):
    """The plan's tuning state for a table: tuned or heuristic, its trials
    and tuning time, the trials that failed by outcome (a variant that
    faulted or computed a wrong answer is a generator bug to look into),
    and why it is untuned."""
    state = r["state"].replace("TUNE_STATE_", "").lower() or "-"
    if r.get("trials"):
        state += f", {r['trials']} trials in {r['tuning_s']:.1f} s"
    failed = r.get("failed_trials") or {}
    if failed:
        kinds = ", ".join(f"{k} {v}" for k, v in failed.items())
        state += f", {sum(failed.values())} failed ({kinds})"
    if r.get("reason"):
        state += f" ({r['reason']})"
    return state


def matmul_summary(r):
    """A matmul row's ratios and verdicts (ratios: baseline ms / kfuse ms)."""
    kms = r["kfuse"]["ms"]
    ratio = {"cublaslt": r["cublaslt"]["ms"] / kms if r["cublaslt"] else None,
             "compile": r["compile"]["ms"] / kms}
    base, want = r["target"]
    got = ratio[base]
    if not r["correct"]:
        verdict = "not met (wrong results)"
    elif got is None:
        verdict = f"unknown (no {BASELINE_NAME[base]} figure)"
    else:
        verdict = "met" if got >= want else "not met"
    per_shape = r["compile_s"] / len(r["gemms"]) if r["compile_s"] is not None else None
    tuning = ("unknown" if per_shape is None else
              "met" if per_shape < TUNING_TARGET_S else "not met")
    return {"case": r["case"], "gemms": r["gemms"], "correct": r["correct"],
            "kfuse_TFLOPs": r["kfuse"]["TFLOPs"],
            "cublaslt_TFLOPs": r["cublaslt"]["TFLOPs"] if r["cublaslt"] else None,
            "compile_TFLOPs": r["compile"]["TFLOPs"], "eager_TFLOPs": r["eager"]["TFLOPs"],
            "kfuse_over_cublaslt": ratio["cublaslt"], "kfuse_over_compile": ratio["compile"],
            "target": f"{want:g}x {BASELINE_NAME[base]}", "verdict": verdict,
            "compile_s": r["compile_s"], "compile_s_per_shape": per_shape, "tuning_verdict": tuning,
            "tuning_s": r["tuning_s"], "trials": r["trials"],
            "failed_trials": r.get("failed_trials", {}), "state": r["state"]}


def matmul_lines(rows):
    """The matmul suite's table and its count of targets met."""
    def f(x, fmt="{:.0f}"):
        return "-" if x is None else fmt.format(x)

    lines = ["bf16, torch.randn inputs (MLP weights x 0.02); do_bench median, warmup 25, rep 150. "
             "TFLOP/s: 2 M N K a product. "
             "GB/s (M <= 64 only): (M K + K N + M N) x 2 bytes, as shared/anchors count them. "
             "Ratios are throughput ratios (baseline ms / kfuse ms). cuBLASLt epilogue: "
             "torch._addmm_activation(bias, a, w, use_gelu=True) (MLP: that, then @ w2; at M = 1 "
             "PyTorch runs it as a GEMM, then a tanh-GELU kernel); "
             "eager: F.gelu(torch.addmm(...), approximate=\"tanh\"); torch.compile of eager, "
             "static shapes. Check: "
             f"{MATMUL_SAMPLE_ROWS} sampled rows against float64, error <= 2 x eager's + "
             "4 eps max|ref|. Compile + tune: wall seconds of `kfuse compile --policy full`; "
             f"target under {TUNING_TARGET_S} s per GEMM shape.", "",
             "| case | M x N x K | kfuse TFLOP/s | cuBLASLt epilogue | torch.compile | eager "
             "| kfuse/cuBLASLt | kfuse/torch.compile | target | verdict | GB/s kfuse / cuBLASLt "
             "| compile + tune s | tuning < 10 s/shape | state | variant | check |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- "
             "| --- | --- | --- |"]
    met = tuned = 0
    for r in rows:
        sm = matmul_summary(r)
        met += sm["verdict"] == "met"
        tuned += sm["tuning_verdict"] == "met"
        dims = " + ".join(f"{m}x{n}x{k}" for m, n, k in r["gemms"])
        gbs = (f"{r['kfuse']['GBps']:.0f} / {f(r['cublaslt'] and r['cublaslt']['GBps'])}"
               if r["small_m"] else "-")
        state = state_text(r)
        lines.append(
            f"| {r['case']} | {dims} | {r['kfuse']['TFLOPs']:.1f} | {f(sm['cublaslt_TFLOPs'], '{:.1f}')} "
            f"| {r['compile']['TFLOPs']:.1f} | {r['eager']['TFLOPs']:.1f} "
            f"| {f(sm['kfuse_over_cublaslt'], '{:.2f}x')} | {sm['kfuse_over_compile']:.2f}x "
            f"| >= {sm['target']} | {sm['verdict']} | {gbs} | {f(r['compile_s'], '{:.1f}')} "
            f"| {sm['tuning_verdict']} | {state} | {r['variant']} "
            f"| {'ok' if r['correct'] else 'WRONG'}: {r['check']} |")
    if rows:
        lines += ["", f"Throughput targets met: {met} of {len(rows)}; tuning-time targets met: "
                  f"{tuned} of {len(rows)}; device copy {rows[0]['copy_GBps']:.0f} GB/s."]
    return lines


def attention_summary(r):
    """An attention row's throughput ratios (baseline ms / kfuse ms) and its
    verdict against the target (kfuse at least ATTN_TARGET x SDPA flash)."""
    k, fl, df = r["kfuse"], r["flash"], r["default"]
    ratio = lambda base: base["ms"] / k["ms"] if k and base else None  # noqa: E731
    over_flash = ratio(fl)
    if not r["timed"]:
        verdict = "correctness only"
    elif k is None:
        verdict = "not met (no kfuse kernel)"
    elif not r["correct"]:
        verdict = "not met (wrong results)"
    elif over_flash is None:
        verdict = "unknown (no SDPA flash figure)"
    else:
        verdict = "met" if over_flash >= r["target"][1] else "not met"
    tf = lambda x: x["TFLOPs"] if x else None  # noqa: E731
    return {"case": r["case"], "dims": r["dims"], "causal": r["causal"], "correct": r["correct"],
            "kfuse_TFLOPs": tf(k), "flash_TFLOPs": tf(fl), "default_TFLOPs": tf(df),
            "eager_TFLOPs": tf(r["eager"]), "compile_TFLOPs": tf(r["compile"]),
            "kfuse_over_flash": over_flash, "kfuse_over_default": ratio(df),
            "kfuse_over_compile": ratio(r["compile"]),
            "target": f"{r['target'][1]:g}x SDPA flash", "verdict": verdict,
            "compile_s": r["compile_s"], "tuning_s": r["tuning_s"], "trials": r["trials"],
            "failed_trials": r.get("failed_trials", {}),
            "state": r["state"], "skipped": r["skipped"]}


def attention_lines(rows):
    """The attention suite's table and its count of targets met."""
    def f(x, fmt="{:.1f}"):
        return "-" if x is None else fmt.format(x)

    lines = ["bf16, q, k, v torch.randn (std 1); do_bench median, warmup 25, rep 150. "
             "TFLOP/s: FLOPs = 4 B H Sq Sk D, halved for causal masks (the usual convention: "
             "the masked half is not counted). Ratios are throughput ratios (baseline ms / "
             "kfuse ms). SDPA flash: F.scaled_dot_product_attention under "
             "sdpa_kernel(SDPBackend.FLASH_ATTENTION) (enable_gqa=True for grouped heads); "
             "SDPA default: the backend SDPA picks itself; eager (unfused): q k^T, scale, "
             "mask, softmax in f32, p v as separate ops; torch.compile of that, static shapes. "
             "Check: sampled (batch, head) pairs and query rows against float64, error <= 2 x "
             "SDPA math backend's + 4 eps(bf16) max|ref|, rows with no key exactly 0. "
             "Compile + tune: wall seconds of `kfuse compile --policy full`.", "",
             "| case | B x H/Hkv x Sq x Sk x D | mask | kfuse TFLOP/s | SDPA flash | SDPA default "
             "| torch.compile (unfused) | eager (unfused) | kfuse/SDPA flash | target | verdict "
             "| kfuse/SDPA default | compile + tune s | state | variant | check |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: "
             "| --- | --- | --- |"]
    met = timed = correct = 0
    for r in rows:
        sm = attention_summary(r)
        timed += r["timed"]
        met += sm["verdict"] == "met"
        correct += r["correct"]
        b, h, hkv, sq, sk, d = r["dims"]
        heads = f"{h}" if h == hkv else f"{h}/{hkv}"
        mask = ", ".join((["causal"] if r["causal"] else []) +
                         ([f"lengths {','.join(map(str, r['lengths']))}"] if r["lengths"] else []))
        state = state_text(r)
        check = ("ok" if r["correct"] else "WRONG") + f": {r['check']}"
        if r["skipped"]:
            check += "; not timed: " + "; ".join(f"{k} ({v})" for k, v in r["skipped"].items())
        lines.append(
            f"| {r['case']} | {b} x {heads} x {sq} x {sk} x {d} | {mask or '-'} "
            f"| {f(sm['kfuse_TFLOPs'])} | {f(sm['flash_TFLOPs'])} | {f(sm['default_TFLOPs'])} "
            f"| {f(sm['compile_TFLOPs'])} | {f(sm['eager_TFLOPs'])} "
            f"| {f(sm['kfuse_over_flash'], '{:.2f}x')} "
            f"| {'-' if not r['timed'] else '>= ' + sm['target']} | {sm['verdict']} "
            f"| {f(sm['kfuse_over_default'], '{:.2f}x')} | {f(r['compile_s'])} | {state} "
            f"| {r['variant'] or '-'} | {check.replace('|', '/')} |")
    if rows:
        lines += ["", f"Throughput targets met: {met} of {timed} timed cases "
                  f"(kfuse >= {ATTN_TARGET:g}x SDPA flash); correct: {correct} of {len(rows)} cases."]
    return lines


def same_copy_fraction(r):
    """kfuse's GB/s over a same-bytes copy's, or "-" for rows from before
    the suite measured one."""
    return f"{r['kfuse']['GBps'] / r['copy_same_GBps']:.3f}" if r.get("copy_same_GBps") else "-"


def bandwidth_lines(copy, rows, sweeps):
    """The pointwise and row suites' tables (GB/s against the copy)."""
    lines = [f"Device copy (1 GiB, read + write): {copy['GBps']} GB/s. Bytes: each input read "
             "once, each output written once. do_bench median, warmup 25, rep 150.", "",
             "The fraction of copy is against the 1 GiB copy; beside it, against a copy of the "
             "case's own bytes in the same run (fixed costs such as the flush's write-backs "
             "weigh more on fewer bytes).", "",
             "| case | bytes | kfuse GB/s | fraction of copy | of a same-bytes copy | eager GB/s "
             "| torch.compile GB/s | speedup vs compile | verdict | tuner ms / bench ms | state "
             "| variant | check |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- | --- |"]
    for r in rows:
        kf, eg, tc = r["kfuse"]["GBps"], r["eager"]["GBps"], r["compile"]["GBps"]
        lines.append(
            f"| {r['case']} | {r['bytes'] / 1e6:.0f} MB | {kf:.0f} | {kf / r['copy_GBps']:.2f} "
            f"| {same_copy_fraction(r)} "
            f"| {eg:.0f} | {tc:.0f} | {r['compile']['ms'] / r['kfuse']['ms']:.2f}x "
            f"| {r['bound']} | {r['tuner_ms']:.4f} / {r['kfuse']['ms']:.4f} = "
            f"{r['tuner_ms'] / r['kfuse']['ms']:.3f} "
            f"| {state_text(r)} | {r['variant']} "
            f"| {'ok' if r['correct'] else 'WRONG'}: {r['check']} |")
    if rows:
        speedups = [r["compile"]["ms"] / r["kfuse"]["ms"] for r in rows]
        fractions = [r["kfuse"]["GBps"] / r["copy_GBps"] for r in rows]
        lines += ["", f"Geometric mean speedup vs torch.compile: "
                  f"{math.exp(sum(map(math.log, speedups)) / len(speedups)):.3f}x over {len(rows)} "
                  f"cases; fraction of copy from {min(fractions):.2f} to {max(fractions):.2f}."]
    if sweeps:
        lines += ["", "One kernel per row width at other row counts (GB/s relative to the "
                  "figure at the row count it was run for above; a same-bytes copy's at these "
                  "rows relative to its own there, and the kernel against that copy):", "",
                  "| case | rows | kfuse GB/s | relative | copy relative | of a same-bytes copy "
                  "| check |", "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for sw in sweeps:
            base = next((r for r in rows if r["name"] == sw["case"]), None)
            for pt in sw["points"]:
                rel = pt["kfuse"]["GBps"] / base["kfuse"]["GBps"] if base else float("nan")
                crel = (f"{pt['copy_same_GBps'] / base['copy_same_GBps']:.3f}"
                        if base and "copy_same_GBps" in pt and "copy_same_GBps" in base else "-")
                lines.append(f"| {sw['case']} | {pt['case'].split('@')[1]} | "
                             f"{pt['kfuse']['GBps']:.0f} | {rel:.3f} | {crel} | "
                             f"{same_copy_fraction(pt)} | "
                             f"{'ok' if pt['correct'] else 'WRONG'}: {pt['check']} |")
    return lines


def write_results(args, device, copy, rows, records, sweeps, quiet=False):
    os.makedirs(args.out, exist_ok=True)
    today = datetime.date.today().isoformat()
    stem = os.path.join(args.out, f"{today}-{args.suite}" + ("-quick" if args.quick else ""))
    result = {"device": device, "suite": args.suite, "quick": args.quick,
              "records": records, "sweeps": sweeps}
    if args.suite == "matmul":
        result["summary"] = [matmul_summary(r) for r in rows]
    elif args.suite == "attention":
        result["summary"] = [attention_summary(r) for r in rows]
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    lines = [f"# kfuse {args.suite} suite vs anchors ({device}, {today}"
             f"{', quick sizes' if args.quick else ''})", ""]
    if args.suite == "matmul":
        lines += matmul_lines(rows)
    elif args.suite == "attention":
        lines += attention_lines(rows)
    else:
        lines += bandwidth_lines(copy, rows, sweeps)
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    if not quiet:
        print("\n".join(lines))
        print(f"wrote {stem}.json and {stem}.md")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write-cases", help="write each case's chain JSON")
    w.add_argument("dir")
    w.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    b = sub.add_parser("bench", help="check and time kfuse against the anchors")
    b.add_argument("--manifests", required=True, help="directory of <case>.json manifests")
    b.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "..", "results"))
    b.add_argument("--quick", action="store_true", help="the small sizes write-cases --quick wrote")
    b.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    b.add_argument("--suite", choices=SUITES, default="pointwise")
    args = p.parse_args()
    if args.cmd == "write-cases":
        write_cases(args.dir, args.quick)
        return 0
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
