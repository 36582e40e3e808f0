"""kfuse.torch.fuse: translation of torch functions into chains (RMSNorm
in its ATen forms, evaluated in float64 against torch), the fallbacks
(unsupported ops, unreachable or refusing server, grad inputs, host
tensors), the plan cache against a real kfused, and (marked gpu) fused
launches compared with eager PyTorch plus the warm-call overhead."""
import math
import socket
import time
import types
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import kfuse  # noqa: E402
import kfuse.torch as kt  # noqa: E402
from kfuse import pb  # noqa: E402
from doubles import CountingClient, kinds  # noqa: E402

F = torch.nn.functional


_kinds = kinds


class EagerLauncher:
    """A launcher double for host tensors: writes the eager result into the
    outputs, recording each launch."""

    def __init__(self, fn):
        self.fn, self.launches = fn, []

    def launch(self, plan, inputs, outputs, stream=0):
        kfuse.resolve(plan, inputs, outputs)  # The real launcher's checks.
        self.launches.append((plan.key, [tuple(o.shape) for o in outputs]))
        res = self.fn(*inputs)
        for o, r in zip(outputs, res if isinstance(res, tuple) else (res,)):
            o.copy_(r)


def _add_rms(x, r, w):
    s = x + r
    return s, F.rms_norm(s, (s.shape[-1],), w, 1e-6)


def _silu_mul(x, y):
    return F.silu(x) * y


CASES = {
    "silu_mul": (_silu_mul, [("bf16", (4, 64)), ("bf16", (4, 64))], ["OP_SILU", "OP_MUL"]),
    "gelu_tanh_bias": (lambda x, b: F.gelu(x + b, approximate="tanh"),
                       [("f32", (8, 32)), ("f32", (32,))], ["OP_ADD", "OP_GELU_TANH"]),
    "gelu_erf_method": (lambda x: x.sigmoid() * F.gelu(x), [("f32", (16,))],
                        ["OP_SIGMOID", "OP_GELU_ERF", "OP_MUL"]),
    "scalars_and_cast": (lambda x: (x * 2.0 - 1).float(), [("f16", (8, 8))],
                         ["OP_CONSTANT", "OP_MUL", "OP_CONSTANT", "OP_SUB", "OP_CAST"]),
    "pow_where_relu": (lambda x, y: torch.where(x > 0, x ** 2, torch.relu(y)),
                       [("f32", (4, 4)), ("f32", (4, 4))],
                       ["OP_CONSTANT", "OP_GT", "OP_CONSTANT", "OP_POW", "OP_RELU", "OP_WHERE"]),
    "max_min_exp_log": (lambda a, b: torch.log(torch.maximum(a, b)) + torch.exp(torch.minimum(a, b)),
                        [("f32", (8,)), ("f32", (8,))],
                        ["OP_MAXIMUM", "OP_LOG", "OP_MINIMUM", "OP_EXP", "OP_ADD"]),
    "reductions": (lambda x: x.sum(-1, keepdim=True) + torch.mean(x, dim=-1, keepdim=True)
                   - torch.amax(x, -1, keepdim=True), [("f32", (4, 128))],
                   ["OP_REDUCE_SUM", "OP_REDUCE_MEAN", "OP_ADD", "OP_REDUCE_MAX", "OP_SUB"]),
    "full_reductions": (lambda x: x.sum() + torch.mean(x) - x.amax(), [("f32", (4, 128))],
                        ["OP_REDUCE_SUM", "OP_REDUCE_MEAN", "OP_ADD", "OP_REDUCE_MAX", "OP_SUB"]),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), [("bf16", (4, 64)), ("bf16", (4, 64))],
                 ["OP_SUB", "OP_SQUARE", "OP_REDUCE_MEAN"]),
    "softmax": (lambda x: F.softmax(x, dim=-1), [("f32", (4, 128))],
                ["OP_REDUCE_MAX", "OP_SUB", "OP_EXP", "OP_REDUCE_SUM", "OP_DIV"]),
    # Views beside reductions: a plan whose pointwise kernels compute them.
    "slice_softmax": (lambda x: F.softmax(x[:, 3:120], dim=-1), [("f32", (4, 128))],
                      ["OP_SLICE", "OP_REDUCE_MAX", "OP_SUB", "OP_EXP", "OP_REDUCE_SUM", "OP_DIV"]),
    # A slice whose rows keep 16-byte alignment: read in place by the row kernel.
    "slice_softmax_in_place": (lambda x: F.softmax(x[:, 64:192], dim=-1), [("f32", (4, 256))],
                               ["OP_SLICE", "OP_REDUCE_MAX", "OP_SUB", "OP_EXP", "OP_REDUCE_SUM", "OP_DIV"]),
    "softmax_transposed": (lambda x: F.softmax(x, dim=-1).t(), [("f32", (4, 128))],
                           ["OP_REDUCE_MAX", "OP_SUB", "OP_EXP", "OP_REDUCE_SUM", "OP_DIV", "OP_PERMUTE"]),
    "add_rms_norm": (_add_rms, [("f32", (4, 256)), ("f32", (4, 256)), ("f32", (256,))],
                     ["OP_ADD", "OP_SQUARE", "OP_REDUCE_MEAN", "OP_CONSTANT", "OP_ADD",
                      "OP_RSQRT", "OP_MUL", "OP_MUL"]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (64,), w, b), [("f32", (2, 64)), ("f32", (64,)),
                                                                  ("f32", (64,))],
                   ["OP_REDUCE_MEAN", "OP_SUB", "OP_SQUARE", "OP_REDUCE_MEAN", "OP_CONSTANT",
                    "OP_ADD", "OP_RSQRT", "OP_MUL", "OP_MUL", "OP_ADD"]),
    "linear_gelu": (lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"),
                    [("bf16", (4, 64)), ("bf16", (32, 64)), ("bf16", (32,))],
                    ["OP_PERMUTE", "OP_MATMUL", "OP_ADD", "OP_GELU_TANH"]),
    "matmul_operator_relu": (lambda x, w: torch.relu(x @ w), [("f16", (8, 64)), ("f16", (64, 16))],
                             ["OP_MATMUL", "OP_RELU"]),
    "addmm_silu": (lambda b, x, w: F.silu(torch.addmm(b, x, w)),
                   [("bf16", (16,)), ("bf16", (8, 32)), ("bf16", (32, 16))],
                   ["OP_MATMUL", "OP_ADD", "OP_SILU"]),
    "transposed_weights": (lambda x, w, v: x @ w.t() + x @ v.T + torch.mm(x, w.transpose(0, 1)),
                           [("bf16", (8, 32)), ("bf16", (16, 32)), ("bf16", (16, 32))],
                           ["OP_PERMUTE", "OP_MATMUL", "OP_PERMUTE", "OP_MATMUL", "OP_ADD",
                            "OP_PERMUTE", "OP_MATMUL", "OP_ADD"]),
    "batched_scores_softmax": (lambda q, k: F.softmax(q @ k.mT * 0.125, dim=-1),
                               [("bf16", (2, 16, 64)), ("bf16", (2, 16, 64))],
                               ["OP_PERMUTE", "OP_MATMUL", "OP_CONSTANT", "OP_MUL", "OP_REDUCE_MAX",
                                "OP_SUB", "OP_EXP", "OP_REDUCE_SUM", "OP_DIV"]),
    # Views no matmul kernel reads as strides: stored first by a pointwise kernel.
    "fused_projection_parts": (lambda x, w: (lambda p: p[:, :32] @ p[:, 32:64].t())(x @ w),
                               [("bf16", (8, 64)), ("bf16", (64, 96))],
                               ["OP_MATMUL", "OP_SLICE", "OP_SLICE", "OP_PERMUTE", "OP_MATMUL"]),
    "sliced_weight": (lambda x, w: torch.relu(x @ w[:, 1:33]), [("f16", (8, 64)), ("f16", (64, 40))],
                      ["OP_SLICE", "OP_MATMUL", "OP_RELU"]),
    "transposed_activation": (lambda x, y: torch.relu(x).t() @ y, [("bf16", (16, 64)), ("bf16", (16, 64))],
                              ["OP_RELU", "OP_PERMUTE", "OP_MATMUL"]),
    "rotary": (lambda x, cos, sin: x * cos + torch.cat([-x[..., 32:], x[..., :32]], dim=-1) * sin,
               [("bf16", (2, 8, 64)), ("bf16", (8, 64)), ("bf16", (8, 64))],
               ["OP_MUL", "OP_SLICE", "OP_NEG", "OP_SLICE", "OP_CONCAT", "OP_MUL", "OP_ADD"]),
    "chunked_swiglu": (lambda x: F.silu(x.chunk(2, dim=-1)[0]) * x.chunk(2, dim=-1)[1],
                       [("bf16", (4, 128))],
                       ["OP_SLICE", "OP_SLICE", "OP_SILU", "OP_SLICE", "OP_SLICE", "OP_MUL"]),
    "reshape_unsqueeze_expand": (lambda x, b: x.view(4, 2, 32) * b.unsqueeze(0).expand(4, 2, 32),
                                 [("f32", (8, 32)), ("f32", (2, 32))],
                                 ["OP_RESHAPE", "OP_RESHAPE", "OP_EXPAND", "OP_MUL"]),
}
_TORCH = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def _tensors(specs, device="cpu"):
    return [torch.randn(shape, dtype=_TORCH[dt], device=device) for dt, shape in specs]


@pytest.mark.parametrize("name", sorted(CASES))
def test_translation(name):
    fn, specs, kinds = CASES[name]
    chain, nodes, _ = kt.fuse(fn).chain_for(*_tensors(specs))
    assert _kinds(chain) == kinds
    assert len(nodes) == len(kinds)
    proto = chain.to_proto()
    assert [(i.dtype, [d.size for d in i.shape]) for i in proto.inputs] == \
        [(kfuse.dtype_of(dt), list(shape)) for dt, shape in specs]


def test_aten_trace_translates_aten_ops():
    chain, _, _ = kt.fuse(_silu_mul, trace="aten").chain_for(*_tensors(CASES["silu_mul"][1]))
    assert _kinds(chain) == ["OP_SILU", "OP_MUL"]


def test_aten_trace_translates_decomposed_rms_norm():
    specs = CASES["add_rms_norm"][1]
    chain, nodes, tuple_out = kt.fuse(_add_rms, trace="aten").chain_for(*_tensors(specs))
    kinds = _kinds(chain)
    assert tuple_out and kinds[0] == "OP_ADD" and "OP_REDUCE_MEAN" in kinds and "OP_RSQRT" in kinds
    assert len(chain.to_proto().outputs) == 2 and len(nodes) == len(kinds)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_aten_native_layer_norm_translates_as_layer_norm(dtype):
    # torch.compile's graph of F.layer_norm: native_layer_norm, its mean and
    # rstd unread; the chain is the fx form's, and evaluates as torch does.
    fn, specs, kinds = CASES["layer_norm"]
    g = torch.Generator().manual_seed(3)
    args = [torch.randn(shape, generator=g).to(dtype) for _, shape in specs]
    chain, _, _ = kt.fuse(fn, trace="aten").chain_for(*args)
    assert _kinds(chain) == kinds
    (got,) = _f64(chain, args)
    want = fn(*[a.double() for a in args])
    torch.testing.assert_close(got.double(), want, rtol=1e-9, atol=1e-12)


def test_aten_native_layer_norm_refuses_its_mean_where_read():
    def fn(x, w, b):
        out, mean, _ = torch.ops.aten.native_layer_norm.default(x, [64], w, b, 1e-5)
        return out + mean

    with pytest.raises(kt.Unsupported, match=r"output 1 of native_layer_norm \(its mean\)"):
        kt.fuse(fn, trace="aten").chain_for(*_tensors(CASES["layer_norm"][1]))


def test_full_reductions_reduce_every_axis():
    chain, _, _ = kt.fuse(CASES["full_reductions"][0]).chain_for(*_tensors(CASES["full_reductions"][1]))
    reduces = [o.reduce for o in chain.to_proto().ops if o.kind == kfuse.pb.OP_REDUCE_SUM]
    assert [(list(r.axes), r.keepdim) for r in reduces] == [([0, 1], False)]
    for reduction, kinds in (("sum", ["OP_SUB", "OP_SQUARE", "OP_REDUCE_SUM"]),
                             ("none", ["OP_SUB", "OP_SQUARE"])):
        fn = lambda x, y: F.mse_loss(x, y, reduction=reduction)  # noqa: E731
        chain, _, _ = kt.fuse(fn).chain_for(*_tensors(CASES["mse_loss"][1]))
        assert _kinds(chain) == kinds, reduction
    with pytest.raises(kt.Unsupported, match="dtype= is not translated"):
        kt.fuse(lambda x: x.sum(dtype=torch.float32)).chain_for(*_tensors([("f32", (4, 8))]))


def test_aten_trace_translates_mse_loss():
    chain, _, _ = kt.fuse(lambda x, y: F.mse_loss(x, y),
                          trace="aten").chain_for(*_tensors(CASES["mse_loss"][1]))
    kinds = _kinds(chain)
    assert kinds[-1] == "OP_REDUCE_MEAN" and "OP_SUB" in kinds
    assert list(chain.to_proto().ops[-1].reduce.axes) == [0, 1]


def _logits_and_labels(n=8, classes=100, dtype=torch.float32, device="cpu"):
    x = torch.randn(n, classes, dtype=dtype, device=device)
    t = torch.randint(0, classes, (n,), device=device)
    t[::3] = -100  # ignore_index's default.
    return x, t


@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_cross_entropy_picks_the_label_through_an_iota(trace):
    for fn in (lambda x, t: F.cross_entropy(x, t), lambda x, t: F.nll_loss(F.log_softmax(x, -1), t)):
        chain, _, _ = kt.fuse(fn, trace=trace).chain_for(*_logits_and_labels())
        kinds = _kinds(chain)
        assert "OP_IOTA" in kinds and "OP_RESHAPE" in kinds and "OP_CAST" in kinds
        assert [i.dtype for i in chain.to_proto().inputs] == [pb.DTYPE_F32, pb.DTYPE_I64]


def test_class_losses_refuse_what_they_do_not_translate():
    x, t = _logits_and_labels()
    for fn, what in ((lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), "label_smoothing"),
                     (lambda x, t: F.cross_entropy(x, t, weight=x.sum(0)), "weight"),
                     (lambda x, t: F.nll_loss(x.view(2, 4, 100).transpose(1, 2), t.view(2, 4)),
                      "class axis that is not the last")):
        with pytest.raises(kt.Unsupported, match=what):
            kt.fuse(fn).chain_for(x, t)


def test_aten_trace_translates_linear_as_t_and_addmm():
    specs = CASES["linear_gelu"][1]
    chain, _, _ = kt.fuse(lambda x, w, b: F.linear(x, w, b), trace="aten").chain_for(*_tensors(specs))
    assert _kinds(chain) == ["OP_PERMUTE", "OP_MATMUL", "OP_ADD"]


def test_linear_compiles_to_one_matmul_kernel(client):
    x, w, b = _tensors(CASES["linear_gelu"][1])
    plan = kt.fuse(lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"), client=client,
                   mode="heuristic").plan_for(x, w, b)
    assert len(plan.kernels) == 1
    assert plan.kernels[0].variant.family == pb.FAMILY_MATMUL
    assert "epilogue (add, gelu_tanh)" in plan.kernels[0].partition_reason


def test_aten_trace_translates_slices_and_cat():
    fn, specs, _ = CASES["rotary"]
    chain, _, _ = kt.fuse(fn, trace="aten").chain_for(*_tensors(specs))
    kinds = _kinds(chain)
    assert kinds.count("OP_SLICE") == 2 and "OP_CONCAT" in kinds and "OP_NEG" in kinds


@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_tril_and_triu_are_index_comparisons(trace):
    # A causal mask from a buffer (nanoGPT's) or torch.tril itself: the
    # comparison of column and row, no tensor of the mask read.
    def fn(x, m):
        return (torch.tril(x), torch.triu(x, 1), x.tril(-2), torch.tril(m), torch.triu(x, 3) * 2.0)

    x, m = torch.randn(2, 5, 7), torch.rand(5, 7) > 0.3
    chain, _, _ = kt.fuse(fn, trace=trace).chain_for(x, m)
    assert "OP_IOTA" in _kinds(chain)
    got, want = _f64(chain, [x, m]), fn(x.double(), m)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g.to(w.dtype), w, rtol=0, atol=0)


@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_ones_zeros_and_full_are_constants_broadcast(trace):
    # SDPA's math form builds its causal mask as ones(L, S).tril().
    def fn(x):
        d = x.device
        mask = torch.ones(5, 7, dtype=torch.bool, device=d).tril()
        return (x.masked_fill(~mask, 0.0) + torch.zeros(2, 5, 7, device=d),
                torch.full((7,), 2.5, device=d) * x, torch.full((3,), 7, device=d) + x[0, 0, :3].long())

    x = torch.randn(2, 5, 7)
    chain, _, _ = kt.fuse(fn, trace=trace).chain_for(x)
    got, want = _f64(chain, [x]), fn(x.double())
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g.to(w.dtype), w, rtol=0, atol=0)


def test_a_softmax_masked_by_a_tril_compiles(client):
    # nanoGPT's: the scores masked where a tril buffer is 0, then softmax.
    # Row kernels take an iota along their columns, not along rows: a
    # pointwise kernel stores the masked scores, then one row kernel.
    def fn(s, bias):
        return F.softmax(s.masked_fill(torch.tril(bias) == 0, float("-inf")), dim=-1)

    plan = kt.fuse(fn, client=client, mode="heuristic", fallback="raise").plan_for(
        torch.randn(4, 64, 64), torch.ones(64, 64))
    assert [pb.Family.Name(k.variant.family) for k in plan.kernels] == ["FAMILY_POINTWISE",
                                                                         "FAMILY_ROW_REDUCTION"]


@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_integer_and_none_indexes_are_a_slice_then_a_reshape(trace):
    # x[:, :, None] is how repeat_kv (grouped-query attention) adds its dim.
    def fn(x):
        return (x[0] * 2, x[:, None, 1:3] + 1, x[..., -1, None], x[None, ..., None][0, 1, 2:, 0],
                x[:, :, None, :].expand(2, 3, 4, 5).reshape(2, 12, 5))

    x = torch.randn(2, 3, 5)
    chain, _, _ = kt.fuse(fn, trace=trace).chain_for(x)
    got, want = _f64(chain, [x]), fn(x.double())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        torch.testing.assert_close(g.double(), w, rtol=0, atol=0)
    with pytest.raises(kt.Unsupported, match="out of bounds"):  # torch's own check, on meta tensors.
        kt.fuse(lambda x: x[:, 3] * 2).chain_for(torch.randn(4, 3))
    with pytest.raises(kt.Unsupported, match="not tensors or lists"):
        kt.fuse(lambda x: x[[0, 1]] * 2).chain_for(torch.randn(4, 3))


def test_rotary_embedding_compiles_to_one_pointwise_kernel(client):
    fn, specs, _ = CASES["rotary"]
    plan = kt.fuse(fn, client=client, mode="heuristic").plan_for(*_tensors(specs))
    assert len(plan.kernels) == 1
    assert plan.kernels[0].variant.family == pb.FAMILY_POINTWISE
    assert "layout views" in plan.kernels[0].partition_reason


def test_in_place_ops_on_inputs_are_not_translated():
    for trace in ("fx", "aten"):
        with pytest.raises(kt.Unsupported, match="add_|copy_"):
            kt.fuse(lambda x: x.add_(1.0) * 2, trace=trace).chain_for(torch.randn(4))


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="fallback"):
        kt.fuse(_silu_mul, fallback="maybe")
    with pytest.raises(ValueError, match="mode"):
        kt.fuse(_silu_mul, mode="fast")
    with pytest.raises(ValueError, match="trace"):
        kt.fuse(_silu_mul, trace="jit")


def test_integer_sums_are_int64_as_torch_sums_them():
    for dtype in (torch.int32, torch.bool, torch.int64):
        chain, _, _ = kt.fuse(lambda x: x.sum(-1)).chain_for(torch.ones(4, 8, dtype=dtype))
        assert _kinds(chain)[-1] == "OP_REDUCE_SUM"
        assert ("OP_CAST" in _kinds(chain)) == (dtype != torch.int64)


def test_arange_is_an_iota():
    def fn(x):
        steps = torch.arange(2, 2 + 3 * x.shape[-1], 3, dtype=torch.float32, device=x.device)
        return x + torch.arange(x.shape[-1], device=x.device), steps

    chain, _, _ = kt.fuse(fn).chain_for(torch.ones(4, 8, dtype=torch.int64))
    assert "OP_IOTA" in _kinds(chain)
    # A tensor's own device is the plan's: no move.
    chain, _, _ = kt.fuse(lambda x: x.to(x.device) * 2).chain_for(torch.ones(8))
    assert "OP_CAST" not in _kinds(chain)
    chain, _, _ = kt.fuse(lambda x: x.to(x.device, torch.float16) * 2).chain_for(torch.ones(8))
    assert "OP_CAST" in _kinds(chain)
    with pytest.raises(kt.Unsupported, match=r"only .to\(dtype\) and .to\(a tensor's .device\)"):
        kt.fuse(lambda x: x.to("meta") * 2).chain_for(torch.ones(8))  # Any named device.
    # With no tensor argument the trace folds an arange to a constant:
    # device=x.device keeps it a call.
    with pytest.raises(kt.Unsupported, match="arange of Python ints"):
        kt.fuse(lambda x: x + torch.arange(0.5, 8.5, device=x.device)).chain_for(torch.ones(8))
    with pytest.raises(kt.Unsupported, match="empty arange"):
        kt.fuse(lambda x: x.sum() + torch.arange(5, 5, device=x.device).sum()).chain_for(torch.ones(8))


def test_a_tensors_dtype_is_read_for_casts_back():
    # Attention written as torch's math path is: scores in float32, cast
    # back to the query's dtype by its .dtype.
    def fn(q, k):
        s = (q.float() * 0.125) @ k.float().transpose(-2, -1)
        return torch.softmax(s, -1).to(q.dtype)

    bf16 = torch.ones(4, 8, dtype=torch.bfloat16)
    last = kt.fuse(fn).chain_for(bf16, bf16)[0].to_proto().ops[-1]
    assert last.kind == pb.OP_CAST and last.dtype == pb.DTYPE_BF16


def test_a_dtype_torch_would_promote_is_refused(monkeypatch):
    # A translation that kept int32 where torch sums into int64.
    monkeypatch.setitem(kt._METHODS, "sum", kt._reduce(kfuse.sum))
    ff = kt.fuse(lambda x: x.sum(-1))
    with pytest.raises(kt.Unsupported, match="torch gives torch.int64"):
        ff.chain_for(torch.ones(4, 8, dtype=torch.int32))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _host_fused(fn, client, **kw):
    """A fused fn whose host tensors take the launch path (EagerLauncher)."""
    launcher = EagerLauncher(fn)
    ff = kt.fuse(fn, client=client, launcher=launcher, **kw)
    ff.gpu_only = False
    return ff, launcher


def test_unsupported_op_runs_eagerly_with_one_warning():
    client = CountingClient(error=AssertionError("must not compile"))
    ff, launcher = _host_fused(lambda x: torch.cumsum(x, -1) * 2.0, client)
    x = torch.randn(4, 8)
    with pytest.warns(kfuse.FallbackWarning, match="torch.cumsum") as rec:
        a = ff(x)
        b = ff(x)
    assert len(rec) == 1
    torch.testing.assert_close(a, torch.cumsum(x, -1) * 2.0)
    torch.testing.assert_close(b, a)
    assert client.calls == 0 and not launcher.launches
    with pytest.raises(kt.Unsupported, match="cumsum"):
        kt.fuse(lambda x: torch.cumsum(x, -1), client=client, fallback="raise").plan_for(x)


def test_unreachable_server_warns_once_or_raises():
    dead = kfuse.Client(f"127.0.0.1:{_free_port()}", timeout=5, on_unavailable="raise")
    ff, launcher = _host_fused(_silu_mul, dead)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.warns(kfuse.FallbackWarning, match="unreachable") as rec:
        out = ff(x, y)
        ff(x, y)
        ff(x, y.double())  # Another signature: no second warning.
    assert len(rec) == 1 and not launcher.launches
    torch.testing.assert_close(out, F.silu(x) * y)
    strict, _ = _host_fused(_silu_mul, dead, fallback="raise")
    with pytest.raises(kfuse.ServerUnavailable):
        strict(x, y)
    quiet, _ = _host_fused(_silu_mul, dead, fallback="silent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(quiet(x, y), F.silu(x) * y)


def test_rejected_chain_raises_the_servers_error_naming_the_node():
    err = kfuse.KfuseError("INVALID_ARGUMENT", "op 1 (mul): operands do not broadcast")
    ff = kt.fuse(_silu_mul, client=CountingClient(error=err))
    with pytest.raises(kfuse.KfuseError) as e:
        ff.plan_for(torch.randn(4, 8), torch.randn(4, 8))
    assert e.value.code == "INVALID_ARGUMENT" and "broadcast" in e.value.message
    assert e.value.op == 1 and e.value.node == "mul"


def test_unimplemented_chain_runs_eagerly_or_raises():
    err = kfuse.KfuseError("UNIMPLEMENTED", "op 0 (silu): no generator for this chain")
    client = CountingClient(error=err)
    ff, launcher = _host_fused(_silu_mul, client)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.warns(kfuse.FallbackWarning, match="no generator") as rec:
        out = ff(x, y)
        ff(x, y)
    assert len(rec) == 1 and client.calls == 1 and not launcher.launches
    torch.testing.assert_close(out, F.silu(x) * y)
    with pytest.raises(kfuse.KfuseError, match="no generator"):
        kt.fuse(_silu_mul, client=client, fallback="raise").plan_for(x, y)


def test_a_server_failure_runs_eagerly_or_raises():
    err = kfuse.KfuseError("INTERNAL", "kernel 0: the heuristic variant pointwise{vec=4} failed on the GPU")
    client = CountingClient(error=err)
    ff, launcher = _host_fused(_silu_mul, client)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with pytest.warns(kfuse.FallbackWarning, match="failed on the GPU"):
        out = ff(x, y)
    assert client.calls == 1 and not launcher.launches
    torch.testing.assert_close(out, F.silu(x) * y)
    with pytest.raises(kfuse.KfuseError, match="failed on the GPU"):
        kt.fuse(_silu_mul, client=client, fallback="raise").plan_for(x, y)


def test_unreachable_server_is_retried_later(monkeypatch):
    monkeypatch.setattr(kt, "RETRY_SECONDS", 0.2)
    client = CountingClient(error=kfuse.ServerUnavailable("UNAVAILABLE", "down"))
    ff, _ = _host_fused(_silu_mul, client, fallback="silent")
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    ff(x, y)
    ff(x, y)
    assert client.calls == 1
    time.sleep(0.3)
    ff(x, y)  # Past the retry time: the entry is dropped ...
    ff(x, y)  # ... and this call asks again.
    assert client.calls == 2


@pytest.mark.parametrize("code", ["RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "UNAVAILABLE"])
def test_transient_server_errors_run_eagerly_and_retry_with_backoff(monkeypatch, client, code):
    clock = [0.0]
    monkeypatch.setattr(kt, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(kt, "RETRY_SECONDS", 10.0)
    monkeypatch.setattr(kt, "RETRY_MAX_SECONDS", 25.0)
    kt.plans.clear()  # Each run compiles its own plan.
    counting = CountingClient(client)
    counting.error = kfuse.KfuseError(code, "job queue full")
    ff, launcher = _host_fused(_silu_mul, counting, mode="heuristic")
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    key = kt._signature((x, y))[1]
    delays = []
    with pytest.warns(kfuse.FallbackWarning, match="job queue full") as rec:
        torch.testing.assert_close(ff(x, y), F.silu(x) * y)
        for _ in range(4):
            entry = ff.cache.peek(key)
            delays.append(entry.retry_at - clock[0])
            clock[0] = entry.retry_at
            ff(x, y)  # Past the retry time: the entry is dropped ...
            ff(x, y)  # ... and this call asks again, failing again.
    assert len(rec) == 1 and delays == [10, 20, 25, 25] and counting.calls == 5
    assert not launcher.launches
    counting.error = None  # kfused answers again: the backoff starts over.
    clock[0] = ff.cache.peek(key).retry_at
    ff(x, y)
    ff(x, y)
    assert counting.calls == 6 and len(launcher.launches) == 1
    counting.error = kfuse.KfuseError(code, "job queue full")
    x2, y2 = torch.randn(2, 8), torch.randn(2, 8)
    ff(x2, y2)
    assert ff.cache.peek(kt._signature((x2, y2))[1]).retry_at - clock[0] == 10
    with pytest.raises(kfuse.KfuseError) as e:
        _host_fused(_silu_mul, counting, fallback="raise")[0](x2, y2)
    assert e.value.code == code


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.float8_e4m3fn])
def test_an_input_dtype_chains_lack_runs_eagerly(dtype):
    client = CountingClient(error=AssertionError("must not compile"))

    def fn(x):
        return x.float() * 2.0

    ff, launcher = _host_fused(fn, client)
    x = torch.arange(16).view(4, 4).to(dtype)
    with pytest.warns(kfuse.FallbackWarning, match="unknown dtype") as rec:
        out = ff(x)
        ff(x)
    assert len(rec) == 1 and client.calls == 0 and not launcher.launches
    torch.testing.assert_close(out, fn(x))
    with pytest.raises(kt.Unsupported, match="input 'x'.*unknown dtype"):
        kt.fuse(fn, client=client, fallback="raise").plan_for(x)


@pytest.mark.parametrize("fallback", ["warn", "raise"])
def test_zero_size_inputs_run_eagerly_without_rpc(fallback):
    client = CountingClient(error=AssertionError("no compile"))
    ff, launcher = _host_fused(_silu_mul, client, fallback=fallback)
    x, y = torch.randn(0, 8), torch.randn(0, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            out = ff(x, y)
    assert out.shape == (0, 8) and client.calls == 0 and not launcher.launches


def test_shared_plans_are_per_server_pin_and_mode(kfused, client):
    pytest.importorskip("nacl", reason="PyNaCl is not installed")
    kt.plans.clear()
    x, y = torch.randn(3, 40), torch.randn(3, 40)
    a = CountingClient(client)
    _host_fused(_silu_mul, a, mode="heuristic")[0](x, y)
    _host_fused(_silu_mul, a, mode="heuristic")[0](x, y)  # The same client and mode: shared.
    assert a.calls == 1
    _host_fused(_silu_mul, a, mode="quick")[0](x, y)  # Another mode: its own plan.
    assert a.calls == 2
    # A client pinning the server's key gets (and verifies) its own plan.
    with kfuse.Client(kfused[0], timeout=60, on_unavailable="raise", verify_key=kfused[1]) as c:
        b = CountingClient(c)
        _host_fused(_silu_mul, b, mode="heuristic")[0](x, y)
    assert b.calls == 1 and a.calls == 2


def test_concurrent_first_calls_compile_once(client):
    import threading

    counting = CountingClient(client)
    ff, launcher = _host_fused(_silu_mul, counting, mode="heuristic")
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    want = F.silu(x) * y
    errors, start = [], threading.Barrier(8)

    def worker():
        start.wait()
        for _ in range(20):
            try:
                torch.testing.assert_close(ff(x, y), want)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and counting.calls <= 1 and len(launcher.launches) == 160


def test_grad_inputs_raise_inference_only():
    ff = kt.fuse(_silu_mul, client=CountingClient(error=AssertionError("no compile")))
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="inference-only"):
        ff(x, torch.randn(4))
    with torch.no_grad():
        torch.testing.assert_close(ff(x, torch.randn(4) * 0), torch.zeros(4))


def test_host_tensors_run_eagerly_without_rpc():
    client = CountingClient(error=AssertionError("no compile"))
    ff = kt.fuse(_silu_mul, client=client)
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(ff(x, y), F.silu(x) * y)
    assert client.calls == 0 and len(ff.cache) == 0


def test_plan_is_cached_per_signature(client):
    counting = CountingClient(client)
    ff, launcher = _host_fused(_add_rms, counting, mode="heuristic")
    x, r, w = torch.randn(4, 256), torch.randn(4, 256), torch.randn(256)
    s, n = ff(x, r, w)
    s2, n2 = ff(x, r, w)
    assert counting.calls == 1 and len(launcher.launches) == 2
    want_s, want_n = _add_rms(x, r, w)
    torch.testing.assert_close(s2, want_s)
    torch.testing.assert_close(n2, want_n)
    assert launcher.launches[0][1] == [(4, 256), (4, 256)]
    ff(torch.randn(8, 256), torch.randn(8, 256), w)  # A new shape: a new plan.
    assert counting.calls == 2
    assert ff.cache.hits >= 1 and len(ff.cache) == 2
    # Another function with the same chain shares the plan: no RPC.
    other, _ = _host_fused(_add_rms, counting, mode="heuristic")
    other(x, r, w)
    assert counting.calls == 2


@pytest.mark.parametrize("name,families", [
    ("fused_projection_parts", ["MATMUL", "POINTWISE", "POINTWISE", "MATMUL"]),
    ("sliced_weight", ["POINTWISE", "MATMUL"]),
    ("transposed_activation", ["POINTWISE", "MATMUL"]),
])
def test_views_beside_products_are_stored_first(client, name, families):
    """A slice of a weight or of a product, a transpose of a computed value:
    kfused plans a pointwise kernel that stores the view, which the product
    then streams (compiled by NVRTC here)."""
    fn, specs, _ = CASES[name]
    plan = kt.fuse(fn, client=client, mode="heuristic").plan_for(*_tensors(specs))
    assert plan is not None
    assert [pb.Family.Name(k.variant.family).removeprefix("FAMILY_") for k in plan.kernels] == families
    assert all(k.cubin or k.ptx for k in plan.kernels)


def attention_block(x, wqkv, wo):
    """Causal self-attention between projections, as a model writes it:
    the fused QKV projection split, heads first, SDPA, heads back, the
    output projection (tokens from x, 4 heads of 64)."""
    t, hd = x.shape[0], x.shape[1]
    q, k, v = (x @ wqkv).split(hd, dim=-1)
    q, k, v = q.view(t, 4, hd // 4).transpose(0, 1), k.view(t, 4, hd // 4).transpose(0, 1), \
        v.view(t, 4, hd // 4).transpose(0, 1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(0, 1).reshape(t, hd) @ wo


def test_an_attention_between_projections_is_a_kernel_of_its_own(client):
    bf16 = torch.bfloat16
    ff = kt.fuse(attention_block, client=client, mode="heuristic", fallback="raise")
    plan = ff.plan_for(torch.randn(200, 256, dtype=bf16), torch.randn(256, 768, dtype=bf16),
                       torch.randn(256, 256, dtype=bf16))
    families = [pb.Family.Name(k.variant.family).removeprefix("FAMILY_") for k in plan.kernels]
    # Q, K and V read as slices of the QKV product, the output stored as
    # the rows the output projection reads: no copies between.
    assert families == ["MATMUL", "ATTENTION", "MATMUL"]
    assert "the causal mask" in plan.kernels[1].partition_reason


def written_attention(q, k, v):
    """Attention written out as Llama's reference code has it: the scores
    by matmul, softmax in float32, cast back, times v ([batch, heads,
    tokens, head dim])."""
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])
    return torch.matmul(F.softmax(scores.float(), dim=-1).type_as(q), v)


def repeat_kv(x, groups):
    """Hugging Face's grouped-query heads: [b, kv, s, d] -> [b, kv * groups, s, d]."""
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, groups, s, d).reshape(b, kv * groups, s, d)


def grouped_attention(q, k, v):
    """Grouped-query attention as Hugging Face's eager path writes it:
    repeat_kv, then attention written out (float32 softmax)."""
    k, v = repeat_kv(k, q.shape[1] // k.shape[1]), repeat_kv(v, q.shape[1] // v.shape[1])
    w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])
    return torch.matmul(F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype), v)


def grouped_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4), is_causal=True)


@pytest.mark.parametrize("trace", ["fx", "aten"])
@pytest.mark.parametrize("fn", [grouped_attention, grouped_sdpa])
def test_repeated_kv_heads_are_one_attention_kernel(client, trace, fn):
    # k and v expanded over the group and merged into the heads: the kernel
    # reads head h's k and v at h / 4, no copy of the repeated heads.
    bf16 = torch.bfloat16
    xs = [torch.randn(1, 8, 136, 64, dtype=bf16), torch.randn(1, 2, 136, 64, dtype=bf16),
          torch.randn(1, 2, 136, 64, dtype=bf16)]
    plan = kt.fuse(fn, client=client, mode="heuristic", fallback="raise", trace=trace).plan_for(*xs)
    assert [pb.Family.Name(k.variant.family) for k in plan.kernels] == ["FAMILY_ATTENTION"]


@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_attention_written_out_is_one_kernel(client, trace):
    # ATen's trace holds each product as a bmm between reshapes that merge
    # the batch and head dims; kfused reads them as the product over both.
    bf16 = torch.bfloat16
    plan = kt.fuse(written_attention, client=client, mode="heuristic", fallback="raise", trace=trace).plan_for(
        *[torch.randn(2, 4, 136, 64, dtype=bf16) for _ in range(3)])
    assert [pb.Family.Name(k.variant.family) for k in plan.kernels] == ["FAMILY_ATTENTION"]


def _linear_gelu(x, w):
    return F.gelu(x @ w, approximate="tanh")


def test_a_plan_with_a_compute_bound_product_warns_once(client):
    # 2048^3: 17 GFLOP over 24 MiB, compute-bound by kfused's roofline; its
    # product runs at about 0.6 of cuBLAS's, so the function may be slower
    # than eager, and the user is told once.
    bf16 = torch.bfloat16
    ff = kt.fuse(_linear_gelu, client=client, mode="heuristic")
    with pytest.warns(kfuse.FallbackWarning, match=r"1 compute-bound matrix product\(s\) \(17.2 GFLOP\)"):
        assert ff.plan_for(torch.randn(2048, 2048, dtype=bf16), torch.randn(2048, 2048, dtype=bf16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ff.plan_for(torch.randn(1024, 2048, dtype=bf16), torch.randn(2048, 2048, dtype=bf16))
        # A few rows stream the weights: memory-bound, no warning.
        kt.fuse(_linear_gelu, client=client, mode="heuristic").plan_for(
            torch.randn(16, 2048, dtype=bf16), torch.randn(2048, 2048, dtype=bf16))
        kt.fuse(_linear_gelu, client=client, mode="heuristic", fallback="silent").plan_for(
            torch.randn(2048, 2048, dtype=bf16), torch.randn(2048, 2048, dtype=bf16))


def test_plan_for_fetches_the_real_plan(client):
    counting = CountingClient(client)
    ff = kt.fuse(_silu_mul, client=counting, mode="heuristic")
    x, y = torch.randn(2, 64, dtype=torch.bfloat16), torch.randn(2, 64, dtype=torch.bfloat16)
    plan = ff.plan_for(x, y)
    assert plan.key and plan.outputs[0].dtype == pb.DTYPE_BF16
    assert ff.plan_for(x, y) is plan and counting.calls <= 1
    assert ff.plan_for(x.float(), y.float()).key != plan.key


def test_a_non_contiguous_input_is_sent_at_its_strides():
    x = torch.randn(2, 32, 3)
    for view in (x.transpose(0, 1), x[:, 8:24], x[:1].expand(4, 32, 3), x.permute(2, 0, 1)):
        chain, _, _ = kt.fuse(lambda v: F.softmax(v * 2.0, dim=-1)).chain_for(view)
        spec = chain.to_proto().inputs[0]
        assert [d.size for d in spec.shape] == list(view.shape)
        assert list(spec.strides) == list(view.stride())
    chain, _, _ = kt.fuse(_silu_mul).chain_for(torch.randn(4, 64), torch.randn(4, 64))
    assert [list(i.strides) for i in chain.to_proto().inputs] == [[], []]  # Dense: none sent.


def test_a_misaligned_slice_is_compiled_again_from_its_16_byte_boundary(client):
    """x[:, 1:257] of an f32 [4, 264]: rows in phase with an address one
    element past a boundary. kfused's first plan reads them in aligned
    vectors, which the launch refuses; the chain sent again from the
    boundary (the input [4, 257] at the same strides, sliced [1:]) gets a
    plan that asks no alignment of it, launched with the boundary's
    address, once per signature."""
    counting = CountingClient(client)
    launches = []

    class Launcher:
        def launch(self, plan, inputs, outputs, stream=0):
            kfuse.resolve(plan, inputs, outputs)  # Refuses the first plan's address.
            launches.append((plan, inputs))
            outputs[0].copy_(F.softmax(inputs[0][:, 1:], dim=-1))

    softmax = lambda v: F.softmax(v, dim=-1)  # noqa: E731
    ff = kt.fuse(softmax, client=counting, launcher=Launcher(), mode="heuristic", fallback="raise")
    ff.gpu_only = False
    wide = torch.randn(4, 264)
    x = wide[:, 1:257]
    assert x.data_ptr() % 16 == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            torch.testing.assert_close(ff(x), softmax(x))
    assert counting.calls == 2 and len(launches) == 2
    plan, inputs = launches[0]
    assert [d.size for d in plan.inputs[0].shape] == [4, 257] and list(plan.inputs[0].strides) == [264, 1]
    assert not [c for k in plan.kernels for c in k.preconditions
                if c.kind == pb.Precondition.KIND_ALIGNED and c.buffer.WhichOneof("kind") == "input"]
    assert inputs[0].data_ptr() == x.data_ptr() - 4 and torch.equal(inputs[0][:, 1:], x)
    first = ff.plan_for(x)  # The signature's own plan: aligned vectors of input 0.
    assert [c.value for k in first.kernels for c in k.preconditions
            if c.kind == pb.Precondition.KIND_ALIGNED and c.buffer.WhichOneof("kind") == "input"] == [16]


def test_a_view_torch_refuses_for_the_strides_is_refused_by_name():
    ff = kt.fuse(lambda v: v.view(-1) + 1, fallback="raise")
    with pytest.raises(kt.Unsupported, match="cannot run on meta tensors"):
        ff.chain_for(torch.randn(8, 4).t())


def test_a_strided_input_launches_in_place_with_a_plan_of_its_own(client):
    counting = CountingClient(client)
    fn = lambda v, w: F.rms_norm(v, (v.shape[-1],), w, 1e-6)  # noqa: E731
    ff, launcher = _host_fused(fn, counting, mode="heuristic")
    padded, w = torch.randn(16, 160), torch.randn(128)
    x = padded[:, :128]  # A slice of a wider tensor, passed as it is.
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Fused: no fallback warning.
        torch.testing.assert_close(ff(x, w), fn(x, w))
        torch.testing.assert_close(ff(x, w), fn(x, w))
    assert counting.calls == 1 and len(launcher.launches) == 2
    spec = ff.plan_for(x, w).inputs[0]
    assert list(spec.strides) == [160, 1]
    dense = x.contiguous()
    ff(dense, w)  # Another layout: another signature and plan.
    assert counting.calls == 2 and len(ff.cache) == 2
    assert list(ff.plan_for(dense, w).inputs[0].strides) == []
    # A launch checks the strides against the plan's (the kernel bakes them in).
    with pytest.raises(kfuse.LaunchError, match="strides"):
        kfuse.resolve(ff.plan_for(x, w), [dense, w], [torch.empty(16, 128)])


class RecordingClient(CountingClient):
    """A CountingClient that keeps each chain it compiles."""

    def __init__(self, inner):
        super().__init__(inner)
        self.chains = []

    def compile(self, chain, **kw):
        self.chains.append(chain if isinstance(chain, pb.Chain) else chain.to_proto())
        return super().compile(chain, **kw)


def test_dynamic_rows_share_one_plan_per_bucket(client):
    recording = RecordingClient(client)
    fn = lambda x, r, w: F.rms_norm(x + r, (x.shape[-1],), w, 1e-6)  # noqa: E731
    ff, launcher = _host_fused(fn, recording, mode="heuristic", dynamic=True)
    w = torch.randn(256)
    for rows in (5, 7, 8, 6, 12):
        x, r = torch.randn(rows, 256), torch.randn(rows, 256)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # Fused: no fallback warning.
            torch.testing.assert_close(ff(x, r, w), fn(x, r, w))
    # 5 to 8 rows share the bucket of 8; 12 rows is the bucket of 16.
    assert recording.calls == 2 and len(launcher.launches) == 5 and len(ff.cache) == 5
    hints = []
    for chain in recording.chains:
        x, r, w_spec = chain.inputs
        assert x.shape[0].symbol == r.shape[0].symbol == kt.ROWS and x.shape[1].size == 256
        assert [d.size for d in w_spec.shape] == [256]  # The weight keeps its size.
        hints.append((x.shape[0].hint, x.shape[0].max))
    assert hints == [(8, 8), (16, 16)]
    plan = ff.plan_for(torch.randn(3, 256), torch.randn(3, 256), w)  # The bucket of 4: a third plan.
    assert plan.inputs[0].shape[0].symbol == kt.ROWS and recording.calls == 3


def test_dynamic_rows_leave_an_input_whose_size_merely_equals_the_count(client):
    # 256 rows beside a [256] weight: the weight does not follow the rows (a
    # probe with 257 of each fails), so the rows are a symbol of x alone.
    recording = RecordingClient(client)
    fn = lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6) * w  # noqa: E731
    ff, launcher = _host_fused(fn, recording, mode="heuristic", dynamic=True)
    w = torch.randn(256)
    for rows in (256, 200):
        x = torch.randn(rows, 256)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # Fused: no fallback warning.
            torch.testing.assert_close(ff(x, w), fn(x, w))
    assert recording.calls == 1 and len(launcher.launches) == 2
    x_spec, w_spec = recording.chains[0].inputs
    assert (x_spec.shape[0].symbol, x_spec.shape[0].hint) == (kt.ROWS, 256)
    assert [d.size for d in w_spec.shape] == [256]


def test_dynamic_rows_compile_per_shape_where_an_op_reads_the_count(client):
    recording = RecordingClient(client)
    fn = lambda x: x * (1.0 / x.shape[0])  # noqa: E731 (the count is a constant of the chain)
    ff, _ = _host_fused(fn, recording, mode="heuristic", dynamic=True)
    for rows in (5, 6):
        x = torch.randn(rows, 64)
        torch.testing.assert_close(ff(x), fn(x))
    assert recording.calls == 2
    assert all(not d.symbol for c in recording.chains for d in c.inputs[0].shape)


def test_dynamic_rows_kfused_does_not_generate_compile_per_shape(client):
    # A concat along the rows is not generated with them a symbol: the
    # UNIMPLEMENTED answer is followed by the chain of these shapes.
    recording = RecordingClient(client)
    fn = lambda x: torch.cat([x, x], 0) * 2.0  # noqa: E731
    ff, launcher = _host_fused(fn, recording, mode="heuristic", dynamic=True, fallback="raise")
    x = torch.randn(5, 64)
    torch.testing.assert_close(ff(x), fn(x))
    assert recording.calls == 2 and len(launcher.launches) == 1
    assert recording.chains[0].inputs[0].shape[0].symbol == kt.ROWS
    assert [d.size for d in recording.chains[1].inputs[0].shape] == [5, 64]


def test_dynamic_needs_an_fx_trace_and_a_bool():
    with pytest.raises(ValueError, match="trace='fx'"):
        kt.fuse(_silu_mul, trace="aten", dynamic=True)
    with pytest.raises(ValueError, match="dynamic must be True or False"):
        kt.fuse(_silu_mul, dynamic="rows")


# ---------------------------------------------------------------------------
# RMSNorm as ATen has it: aten._fused_rms_norm (torch.compile's graphs on a
# GPU) and aten.rms_norm, with the float64 value of the chains they give.

def _aten_graph(build, specs):
    """An fx GraphModule of ATen calls made by build(graph, *placeholders)
    (which returns the outputs), node values recorded for inputs of `specs`
    as aot_autograd records them."""
    import operator

    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    g = torch.fx.Graph()
    ph = [g.placeholder(f"arg{i}") for i in range(len(specs))]
    g.output(tuple(build(g, operator.getitem, *ph)))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    FakeTensorProp(gm).propagate(*[torch.empty(shape, dtype=dt) for dt, shape in specs])
    return gm


def _add_fused_rms(eps=1e-6, read_rstd=False, weight=True):
    def build(g, getitem, x, r, w):
        s = g.call_function(torch.ops.aten.add.Tensor, (x, r))
        norm = g.call_function(torch.ops.aten._fused_rms_norm.default,
                               (s, [64], w if weight else None, eps))
        outs = [s, g.call_function(getitem, (norm, 0))]
        return outs + [g.call_function(getitem, (norm, 1))] if read_rstd else outs
    return build


_F64_UNARY = {
    pb.OP_NEG: torch.neg, pb.OP_ABS: torch.abs, pb.OP_EXP: torch.exp, pb.OP_EXP2: torch.exp2,
    pb.OP_LOG: torch.log, pb.OP_LOG2: torch.log2, pb.OP_SQRT: torch.sqrt, pb.OP_RSQRT: torch.rsqrt,
    pb.OP_RECIPROCAL: torch.reciprocal, pb.OP_SIN: torch.sin, pb.OP_COS: torch.cos,
    pb.OP_TANH: torch.tanh, pb.OP_SIGMOID: torch.sigmoid, pb.OP_RELU: torch.relu,
    pb.OP_GELU_ERF: F.gelu, pb.OP_GELU_TANH: lambda a: F.gelu(a, approximate="tanh"),
    pb.OP_SILU: F.silu, pb.OP_SOFTPLUS: F.softplus, pb.OP_SQUARE: torch.square, pb.OP_ERF: torch.erf,
    pb.OP_FLOOR: torch.floor, pb.OP_CEIL: torch.ceil, pb.OP_LOGICAL_NOT: torch.logical_not,
}
_F64_BINARY = {
    pb.OP_ADD: torch.add, pb.OP_SUB: torch.sub, pb.OP_MUL: torch.mul, pb.OP_DIV: torch.div,
    pb.OP_MAXIMUM: torch.maximum, pb.OP_MINIMUM: torch.minimum, pb.OP_POW: torch.pow,
    pb.OP_EQ: torch.eq, pb.OP_NE: torch.ne, pb.OP_LT: torch.lt, pb.OP_LE: torch.le, pb.OP_GT: torch.gt,
    pb.OP_GE: torch.ge, pb.OP_LOGICAL_AND: torch.logical_and, pb.OP_LOGICAL_OR: torch.logical_or,
}
_F64_REDUCE = {pb.OP_REDUCE_SUM: torch.sum, pb.OP_REDUCE_MEAN: torch.mean,
               pb.OP_REDUCE_MAX: torch.amax, pb.OP_REDUCE_MIN: torch.amin}


def _f64(chain, inputs):
    """The chain's outputs on `inputs`, computed in float64 but for casts,
    which round to their type (and convert to bool and integers)."""
    proto = chain.to_proto()
    vals = [t.double() if t.is_floating_point() else t for t in inputs]
    ops = []

    def arg(ref):
        return vals[ref.input] if ref.WhichOneof("kind") == "input" else ops[ref.op]

    def wide(a):
        return a.double() if not a.dtype == torch.bool else a

    for op in proto.ops:
        a = [arg(r) for r in op.args]
        k = op.kind
        if k == pb.OP_CONSTANT:
            v = torch.tensor(op.value, dtype=torch.float64)
        elif k in _F64_UNARY:
            v = _F64_UNARY[k](wide(a[0]) if k != pb.OP_LOGICAL_NOT else a[0])
        elif k in _F64_BINARY:
            v = _F64_BINARY[k](*a)
        elif k == pb.OP_WHERE:
            v = torch.where(a[0], a[1], a[2])
        elif k == pb.OP_CAST:
            target = kt._TORCH_DTYPES[op.dtype]
            v = a[0].to(target) if not target.is_floating_point else a[0].to(target).double()
        elif k in _F64_REDUCE:
            src = a[0].double() if k == pb.OP_REDUCE_MEAN else a[0]
            v = _F64_REDUCE[k](src, list(op.reduce.axes), keepdim=op.reduce.keepdim)
        elif k in (pb.OP_RESHAPE, pb.OP_EXPAND):
            shape = [d.size for d in op.shape.shape]
            v = a[0].reshape(shape) if k == pb.OP_RESHAPE else a[0].expand(shape)
        elif k == pb.OP_PERMUTE:
            v = a[0].permute(list(op.permute.perm))
        elif k == pb.OP_SLICE:
            sl = [slice(None)] * a[0].dim()
            sl[op.slice.axis] = slice(op.slice.start, op.slice.stop, op.slice.step or 1)
            v = a[0][tuple(sl)]
        elif k == pb.OP_CONCAT:
            v = torch.cat(a, op.axis.axis)
        elif k == pb.OP_MATMUL:
            v = a[0] @ a[1]
        elif k == pb.OP_IOTA:
            shape = [d.size for d in op.shape.shape]
            axis = op.axis.axis
            v = torch.arange(shape[axis], dtype=kt._TORCH_DTYPES[op.dtype]).reshape(
                [-1 if i == axis else 1 for i in range(len(shape))]).expand(shape)
        else:
            raise AssertionError(f"_f64: {pb.OpKind.Name(k)}")
        ops.append(v)
    return [arg(o.value) for o in proto.outputs]


def _specials(shape, seed):
    """Normal draws with NaN, +-inf, +-0 and values on activations' kinks
    (-3, 0, 3, 6) sprinkled in."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 4
    flat = x.view(-1)
    picks = torch.randperm(flat.numel(), generator=g)[:12]
    for i, v in zip(picks.tolist(), [math.nan, math.inf, -math.inf, 0.0, -0.0, -3.0, 3.0, 6.0,
                                     math.nan, 20.0, -20.0, 0.5]):
        flat[i] = v
    return x


# Element-wise activations, masks, special-value tests, statistics and
# reshapes that kfuse.torch builds from the chain's primitives: each chain,
# evaluated in float64, against torch on the same inputs in float64 (NaN
# where torch's is, inf likewise), special values included.
COMPOSITES = {
    "clamp_min_max_clip": lambda x: x.clamp_min(-1.0) + x.clamp_max(2.0) + torch.clip(x, max=0.5),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2) + F.leaky_relu(x),
    "hardtanh_relu6": lambda x: F.hardtanh(x, -2.0, 2.0) + F.relu6(x),
    "hardsigmoid_hardswish": lambda x: F.hardsigmoid(x) + F.hardswish(x),
    "softplus_mish": lambda x: F.softplus(x) + F.mish(x),
    "glu": lambda x: F.glu(x, -1),
    "dropout_in_evaluation": lambda x: F.dropout(x, 0.1, training=False) * 2.0,
    "masked_fill": lambda x: x.masked_fill(x > 1.0, -0.5),
    "sign": lambda x: torch.sign(x) * 3.0,
    "fmax_fmin": lambda x: torch.fmax(x, x * -1.0) + torch.fmin(x, x * 0.5),
    "max_min_binary": lambda x: torch.max(x, x * -1.0) - torch.min(x, x + 1.0),
    "max_dim_values": lambda x: x.max(-1).values + x.min(-1, keepdim=True)[0].squeeze(-1),
    "max_all": lambda x: torch.max(x) + x.min(),
    "isnan_isinf_isfinite": lambda x: torch.where(torch.isnan(x) | torch.isinf(x), 0.0, x)
                                      + torch.isfinite(x).float(),
    "nan_to_num": lambda x: torch.nan_to_num(x) + torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0),
    "lerp_scalar_and_tensor": lambda x: torch.lerp(x, x * 2.0, 0.25) + torch.lerp(x, x + 1.0, 0.75)
                                        + torch.lerp(x, -x, torch.sigmoid(x)),
    "addcmul_addcdiv": lambda x: torch.addcmul(x, x, x + 1.0, value=0.5) + torch.addcdiv(x, x, x * x + 1.0),
    "trig_exp2_log2_floor_ceil": lambda x: torch.sin(x) + x.cos() + torch.exp2(x * 0.1)
                                           + torch.log2(x.abs() + 1.0) + x.floor() - torch.ceil(x),
    "var_std": lambda x: x.var(-1) + torch.std(x, -1, keepdim=True).squeeze(-1) + x.var(-1, unbiased=False)
                         + x.var(-1, correction=0),
    "var_mean": lambda x: torch.var_mean(x, -1),
    "logsumexp": lambda x: torch.logsumexp(x, -1) + torch.logsumexp(x, 1, keepdim=True).flatten(),
    "norms_and_normalize": lambda x: x.norm(dim=-1) + torch.linalg.vector_norm(x, dim=-1)
                                     + F.normalize(x, dim=-1).sum(-1),
    "any_all": lambda x: (x > 0).any(-1).float() + (x > -5.0).all(-1).float() + torch.any(x > 3.0, dim=-1).float(),
    "bool_operators": lambda x: torch.where((x > 0) & ~(x > 2.0) | (x < -3.0), x, 0.0),
    "logical_functions": lambda x: torch.logical_and(x > 0, torch.logical_not(x > 1.0)).float()
                                   + torch.logical_or(x > 2.0, x < -2.0).float(),
    "softmax_with_dtype": lambda x: F.softmax(x.half(), -1, dtype=torch.float32),
    "expm1_log1p": lambda x: torch.expm1(x) + torch.log1p(x.abs()) + torch.log1p(x * 1e-6)
                             + torch.expm1(x * 1e-6) * 1e6,
    "elu_selu_celu": lambda x: F.elu(x) + F.elu(x, 0.5) + F.selu(x) + F.celu(x, 2.0),
    "bce_with_logits": lambda x: (F.binary_cross_entropy_with_logits(x, torch.sigmoid(x * 0.3)),
                                  F.binary_cross_entropy_with_logits(x, (x > 0).type_as(x), reduction="none")),
    "logsigmoid_softsign_softmin": lambda x: F.logsigmoid(x) + F.softsign(x) + F.softmin(x, -1)
                                             + torch.special.expit(x) + torch.special.log1p(x.abs()),
    "aliases_and_rsub": lambda x: torch.multiply(x, 2.0) - torch.subtract(x, 1.0) + torch.divide(x, 4.0)
                                  + torch.true_divide(x, 3.0) + torch.negative(x) + torch.absolute(x)
                                  + torch.greater(x, 0).float() + torch.less_equal(x, 1.0).float()
                                  + torch.rsub(x, 1.0) + (1.0 - x),
    "stack": lambda x: torch.stack([x, x * 2.0], -1),
    # rotate_every_two: the stack's axis merged with its neighbour.
    "interleaved_rotary": lambda x: x * 0.5 + torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2) * 2.0,
    "transpose_flatten": lambda x: (x * 2.0).t().flatten() + 1.0,
    # Outputs whose shapes do not broadcast together: a kernel each.
    "outputs_and_their_views": lambda x: (torch.exp(x * 0.1), torch.exp(x * 0.1).flatten(), (x * 3.0).t()),
    "flatten_squeeze": lambda x: (x * 3.0).unsqueeze(0).flatten(0, 1).unsqueeze(1).squeeze(),
    "type_as_contiguous": lambda x: (x * 2.0).type_as(x).contiguous() + x.detach(),
}
_IN_ITS_DTYPE = {"nan_to_num"}  # Its values are the input dtype's largest.
_RTOL = {"softmax_with_dtype": 1e-6}  # torch's reference computes in its dtype= (float32).
_NO_SPECIALS = {"logsigmoid_softsign_softmin", "var_std", "var_mean", "logsumexp", "norms_and_normalize", "softmax_with_dtype",
                "max_dim_values", "max_all"}  # Their NaN and inf handling is torch's reductions'.


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites_evaluate_as_torch_does(name):
    fn = COMPOSITES[name]
    for seed in (1, 2):
        x = _specials((4, 16), seed) if name not in _NO_SPECIALS else torch.randn(
            4, 16, generator=torch.Generator().manual_seed(seed))
        chain, nodes, tuple_out = kt.fuse(fn).chain_for(x)
        got = _f64(chain, [x])
        want = fn(x if name in _IN_ITS_DTYPE else x.double())
        want = list(want) if tuple_out else [want]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (g.shape, w.shape)
            torch.testing.assert_close(g.double(), w.double(), rtol=_RTOL.get(name, 1e-9), atol=1e-12,
                                       equal_nan=True)


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites_compile(client, name):
    """kfused plans each composite's chain (NVRTC compiles it here), bf16
    and f32: none runs eagerly for want of a plan."""
    for dtype in (torch.float32, torch.bfloat16):
        ff = kt.fuse(COMPOSITES[name], client=client, mode="heuristic", fallback="raise")
        assert ff.plan_for(torch.randn(64, 256, dtype=dtype)) is not None


# make_fx copies a constant's data in these two, which meta tensors do not have.
@pytest.mark.parametrize("name", sorted(set(COMPOSITES) - {"softmax_with_dtype", "bce_with_logits"}))
def test_composites_translate_from_aten_graphs(name):
    """The same functions traced by make_fx (trace="aten"): their ATen ops
    translate and evaluate as torch does."""
    fn = COMPOSITES[name]
    x = _specials((4, 16), 3) if name not in _NO_SPECIALS else torch.randn(4, 16)
    chain, _, tuple_out = kt.fuse(fn, trace="aten").chain_for(x)
    want = fn(x if name in _IN_ITS_DTYPE else x.double())
    for g, w in zip(_f64(chain, [x]), list(want) if tuple_out else [want]):
        torch.testing.assert_close(g.double(), w.double(), rtol=_RTOL.get(name, 1e-9), atol=1e-12,
                                   equal_nan=True)


def _bn_relu_residual(x, rm, rv, w, b):
    return F.relu(F.batch_norm(x, rm, rv, w, b, eps=1e-3) + x)


def _bn_inputs(dtype, stats=torch.float32, seed=5):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 6, 5, 7, generator=g).to(dtype)
    rm = torch.randn(6, generator=g).to(stats)
    rv = (torch.rand(6, generator=g) + 0.1).to(stats)
    w, b = torch.randn(6, generator=g).to(stats), torch.randn(6, generator=g).to(stats)
    return x, rm, rv, w, b


def _expect_as_torch(fn, args, trace, f32_rtol):
    """fn's chain (one output) evaluated in float64 against torch: float32
    within f32_rtol of float64 (the statistics' arithmetic is float32, as
    torch's), 16-bit no further from it than eager (the same roundings)."""
    chain, _, _ = kt.fuse(fn, trace=trace).chain_for(*args)
    (got,) = _f64(chain, list(args))
    assert got.shape == args[0].shape
    want = fn(*[a.double() for a in args])
    if args[0].dtype == torch.float32:
        torch.testing.assert_close(got.double(), want, rtol=f32_rtol, atol=f32_rtol)
    else:
        eager = fn(*args).double()
        assert (got.double() - want).abs().max() <= (eager - want).abs().max() * 1.01


@pytest.mark.parametrize("trace", ["fx", "aten"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_batch_norm_in_evaluation_is_the_running_statistics_per_channel(trace, dtype):
    _expect_as_torch(_bn_relu_residual, _bn_inputs(dtype), trace, 1e-6)


def test_batch_norm_in_training_or_without_running_statistics_is_refused():
    x, rm, rv, w, b = _bn_inputs(torch.float32)
    with pytest.raises(kt.Unsupported, match="batch_norm in training mode"):
        kt.fuse(lambda x, rm, rv: F.batch_norm(x, rm, rv, training=True) * 2).chain_for(x, rm, rv)
    with pytest.raises(kt.Unsupported, match="running_mean should contain 6 elements"):
        kt.fuse(lambda x, rm, rv: F.batch_norm(x, rm, rv)).chain_for(x, rm[:4], rv)


def test_adaptive_average_pools_to_size_one_are_means():
    x = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(2))
    for fn in (lambda x: F.adaptive_avg_pool2d(torch.relu(x), 1).flatten(1),
               lambda x: F.adaptive_avg_pool2d(x, (1, 1)) * 2,
               lambda x: F.adaptive_avg_pool1d(x.flatten(2), 1)):
        chain, _, _ = kt.fuse(fn).chain_for(x)
        (got,) = _f64(chain, [x])
        torch.testing.assert_close(got.double(), fn(x.double()), rtol=1e-12, atol=1e-12)
    with pytest.raises(kt.Unsupported, match="to an output other than size 1"):
        kt.fuse(lambda x: F.adaptive_avg_pool2d(x, 2)).chain_for(x)


def _gn_silu(x, w, b):
    return F.silu(F.group_norm(x, 4, w, b, eps=1e-5))


def _gn_inputs(dtype, seed=6):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 8, 5, 6, generator=g).to(dtype) * 3 + 1, torch.randn(8, generator=g).to(dtype),
            torch.randn(8, generator=g).to(dtype))


@pytest.mark.parametrize("trace", ["fx", "aten"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_is_each_groups_statistics_then_the_channels_affine(trace, dtype):
    _expect_as_torch(_gn_silu, _gn_inputs(dtype), trace, 1e-9)


def test_group_norm_refuses_channels_that_do_not_split():
    with pytest.raises(kt.Unsupported, match="divisible by num_groups"):
        kt.fuse(lambda x: F.group_norm(x, 3)).chain_for(torch.randn(2, 8, 4))


def test_group_norm_is_a_row_kernel_reading_the_input_in_place_then_one_pass(client):
    # x [N, C, H, W] read as the groups' rows [N, G, C / G * H * W] in place
    # for the statistics (no copy first), then once more with the SiLU.
    ff = kt.fuse(_gn_silu, client=client, mode="heuristic", fallback="raise")
    for dtype in (torch.float32, torch.bfloat16):
        plan = ff.plan_for(*_gn_inputs(dtype))
        families = [pb.Family.Name(k.variant.family) for k in plan.kernels]
        assert families == ["FAMILY_ROW_REDUCTION", "FAMILY_POINTWISE"], families


def _ln_chw(x, w, b):
    """LayerNorm over [C, H, W], as some vision models normalize."""
    return F.layer_norm(x, x.shape[1:], w, b, eps=1e-5) * 2.0


def _ln_inputs(dtype, seed=7):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 4, 5, 6, generator=g).to(dtype) * 3 + 1, torch.randn(4, 5, 6, generator=g).to(dtype),
            torch.randn(4, 5, 6, generator=g).to(dtype))


@pytest.mark.parametrize("trace", ["fx", "aten"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_over_several_dims_is_their_rows_statistics_then_the_affine(trace, dtype):
    _expect_as_torch(_ln_chw, _ln_inputs(dtype), trace, 1e-9)


def test_layer_norm_over_several_dims_reads_its_rows_in_place(client):
    ff = kt.fuse(_ln_chw, client=client, mode="heuristic", fallback="raise")
    for dtype in (torch.float32, torch.bfloat16):
        plan = ff.plan_for(*_ln_inputs(dtype))
        families = [pb.Family.Name(k.variant.family) for k in plan.kernels]
        assert families == ["FAMILY_ROW_REDUCTION", "FAMILY_POINTWISE"], families


def test_batch_norm_compiles(client):
    ff = kt.fuse(_bn_relu_residual, client=client, mode="heuristic", fallback="raise")
    for dtype in (torch.float32, torch.bfloat16):
        plan = ff.plan_for(*_bn_inputs(dtype))
        assert plan is not None and len(plan.kernels) == 1


def test_max_along_a_dim_refuses_its_indices_by_name():
    with pytest.raises(kt.Unsupported, match="the indices of max"):
        kt.fuse(lambda x: x.max(-1).indices * 2).chain_for(torch.randn(4, 8))
    with pytest.raises(kt.Unsupported, match="dropout in training mode"):
        kt.fuse(lambda x: F.dropout(x, 0.1) * 2.0).chain_for(torch.randn(4, 8))
    with pytest.raises(kt.Unsupported, match="on other than bool tensors"):
        kt.fuse(lambda x: (x.int() & 3) * 2).chain_for(torch.randn(4, 8))


_RMS_SPECS = [(torch.bfloat16, (4, 64)), (torch.bfloat16, (4, 64)), (torch.bfloat16, (64,))]


@pytest.mark.parametrize("eps", [1e-6, None])
def test_fused_rms_norm_translates_as_rms_norm(eps):
    gm = _aten_graph(_add_fused_rms(eps), _RMS_SPECS)
    chain, nodes, tuple_out = kt.translate(gm, _RMS_SPECS)

    def add_rms(x, r, w):  # The same in torch functions, traced by fx.
        s = x + r
        return s, F.rms_norm(s, (64,), w, eps)

    fx_chain, _, _ = kt.fuse(add_rms).chain_for(*[torch.empty(shape, dtype=dt) for dt, shape in _RMS_SPECS])
    assert _kinds(chain) == ["OP_ADD", "OP_SQUARE", "OP_REDUCE_MEAN", "OP_CONSTANT", "OP_ADD",
                             "OP_RSQRT", "OP_MUL", "OP_MUL"]
    assert chain.to_proto().ops == fx_chain.to_proto().ops
    assert tuple_out and len(nodes) == len(_kinds(chain))
    # Small values, where eps is felt: by default f32's, as torch computes in f32.
    g = torch.Generator().manual_seed(3)
    x, r = (torch.randn(4, 64, generator=g) * 1e-3).bfloat16(), torch.zeros(4, 64).bfloat16()
    w = torch.randn(64, generator=g).bfloat16()
    want = torch.ops.aten._fused_rms_norm(x + r, [64], w, eps)[0]
    s, got = _f64(chain, [x, r, w])
    torch.testing.assert_close(got.bfloat16(), want, atol=2e-2, rtol=1.6e-2)
    torch.testing.assert_close(s.bfloat16(), x + r)


def test_fused_rms_norm_casts_back_to_the_input_dtype():
    specs = _RMS_SPECS[:2] + [(torch.float32, (64,))]  # A float32 weight: torch still gives bf16.
    chain, _, _ = kt.translate(_aten_graph(_add_fused_rms(), specs), specs)
    proto = chain.to_proto()
    assert _kinds(chain)[-1] == "OP_CAST" and proto.ops[-1].dtype == pb.DTYPE_BF16
    assert proto.outputs[1].value.op == len(proto.ops) - 1


def test_fused_rms_norm_without_weight():
    chain, _, _ = kt.translate(_aten_graph(_add_fused_rms(weight=False), _RMS_SPECS), _RMS_SPECS)
    assert _kinds(chain).count("OP_MUL") == 1


def test_reading_the_rstd_of_fused_rms_norm_is_refused():
    gm = _aten_graph(_add_fused_rms(read_rstd=True), _RMS_SPECS)
    with pytest.raises(kt.Unsupported, match=r"output 1 of _fused_rms_norm \(its rstd\)") as e:
        kt.translate(gm, _RMS_SPECS)
    assert e.value.node == "getitem_1"  # The getitem that reads it.


def test_aten_rms_norm_translates():
    specs = _RMS_SPECS[1:]

    def build(g, getitem, x, w):
        return [g.call_function(torch.ops.aten.rms_norm.default, (x, [64], w))]

    chain, _, tuple_out = kt.translate(_aten_graph(build, specs), specs)
    assert _kinds(chain) == ["OP_SQUARE", "OP_REDUCE_MEAN", "OP_CONSTANT", "OP_ADD", "OP_RSQRT",
                             "OP_MUL", "OP_MUL"]
    assert chain.to_proto().ops[2].value == torch.finfo(torch.float32).eps and tuple_out


@pytest.mark.parametrize("name", ["_fused_rms_norm", "rms_norm"])
def test_rms_norm_arguments_it_does_not_know_are_refused(name):
    c = kfuse.Chain()
    x = c.input("x", "bf16", [4, 64])
    f = kt._ATEN[name]
    with pytest.raises(TypeError, match="argument upcast is not translated"):
        f(x, [64], None, 1e-6, upcast=True)
    with pytest.raises(TypeError, match="more than the last dim"):
        f(x, [4, 64], None, 1e-6)
    with pytest.raises(TypeError, match="arguments; got 5"):
        f(x, [64], None, 1e-6, 7)
    out = f(x, [64], None, None)
    assert (len(out) == 2 and isinstance(out[1], kt._Untranslated)) if name == "_fused_rms_norm" \
        else isinstance(out, kfuse.Tensor)


def test_f_rms_norm_without_eps_uses_the_eps_torch_computes_with():
    x = (torch.randn(4, 64, generator=torch.Generator().manual_seed(5)) * 1e-3).bfloat16()
    chain, _, _ = kt.fuse(lambda x: F.rms_norm(x, (64,))).chain_for(x)
    (got,) = _f64(chain, [x])
    torch.testing.assert_close(got.bfloat16(), F.rms_norm(x, (64,)), atol=2e-2, rtol=1.6e-2)


# ---------------------------------------------------------------------------
# GPU: run with a kfused on a GPU machine (see clients/python/README.md).

def _gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("cuda.bindings", reason="cuda-python (cuda.bindings) is not installed")


@pytest.mark.gpu
def test_gpu_fused_silu_mul_and_add_rms_norm(client):
    _gpu()
    counting = CountingClient(client)
    swiglu = kt.fuse(_silu_mul, client=counting, fallback="raise")
    x = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        got = swiglu(x, y)
        got = swiglu(x, y)
    torch.testing.assert_close(got, F.silu(x) * y, atol=2e-2, rtol=1.6e-2)
    assert counting.calls == 1
    # The informational environment: this GPU and the driver's version.
    env = counting.last_kw["env"]
    assert env.device.name == torch.cuda.get_device_name()
    assert (env.device.cc_major, env.device.cc_minor) == torch.cuda.get_device_capability()
    assert env.driver_version >= 12000

    add_rms = kt.fuse(_add_rms, client=counting, fallback="raise")
    a, r = (torch.randn(512, 4096, device="cuda") for _ in range(2))
    w = torch.randn(4096, device="cuda")
    with torch.inference_mode():
        s, n = add_rms(a, r, w)
    want_s, want_n = _add_rms(a, r, w)
    torch.testing.assert_close(s, want_s)
    torch.testing.assert_close(n, want_n, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
def test_gpu_fused_losses_over_every_axis(client):
    """A mean squared error and a full sum: the server plans them as a row
    kernel storing per-row results and a kernel reducing those."""
    _gpu()
    mse = kt.fuse(lambda x, y: F.mse_loss(x, y), client=client, fallback="raise")
    total = kt.fuse(lambda x: torch.sum(x * x), client=client, fallback="raise")
    for dt, atol in ((torch.bfloat16, 1e-2), (torch.float32, 1e-4)):
        x = torch.randn(4099, 1000, device="cuda", dtype=dt)
        y = torch.randn(4099, 1000, device="cuda", dtype=dt)
        with torch.inference_mode():
            got, want = mse(x, y), F.mse_loss(x.double(), y.double())
            assert got.shape == torch.Size([]) and got.dtype == dt
            torch.testing.assert_close(got.double(), want, atol=atol, rtol=atol)
            got, want = total(x), torch.sum(x.double() * x.double())
            torch.testing.assert_close(got.double(), want, atol=atol * want.item(), rtol=atol)


@pytest.mark.gpu
@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_gpu_fused_cross_entropy_with_labels(client, trace):
    """F.cross_entropy and F.nll_loss with int64 labels, a third of them
    ignore_index, over a 50257-wide vocabulary: per row, summed and
    averaged over the rows not ignored, against float64."""
    _gpu()
    for dt, tol in ((torch.bfloat16, 2e-2), (torch.float32, 1e-5)):
        x, t = _logits_and_labels(4099, 50257, dt, "cuda")
        for reduction in ("none", "sum", "mean"):
            ce = kt.fuse(lambda x, t: F.cross_entropy(x, t, reduction=reduction), client=client,
                         fallback="raise", trace=trace)
            nll = kt.fuse(lambda x, t: F.nll_loss(F.log_softmax(x, -1), t, reduction=reduction),
                          client=client, fallback="raise", trace=trace)
            want = F.cross_entropy(x.double(), t, reduction=reduction)
            with torch.inference_mode():
                for fn in (ce, nll):
                    got = fn(x, t)
                    assert got.shape == want.shape and got.dtype == dt, (reduction, dt)
                    torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol)


@pytest.mark.gpu
def test_gpu_warm_call_overhead(client):
    _gpu()
    swiglu = kt.fuse(_silu_mul, client=client, fallback="raise")
    x, y = (torch.randn(8, 1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    n = 1000
    with torch.inference_mode():
        swiglu(x, y)
        plan = swiglu.plan_for(x, y)
        out = torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream
        launcher = swiglu.launcher
        lookups = swiglu.cache.hits + swiglu.cache.misses
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            swiglu(x, y)
        torch.cuda.synchronize()
        fused = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(n):
            launcher.launch(plan, [x, y], [out], stream=stream)
        torch.cuda.synchronize()
        bare = time.perf_counter() - t0
    overhead_us = (fused - bare) / n * 1e6
    print(f"\nkfuse.torch warm call: {fused / n * 1e6:.1f} us, launch alone {bare / n * 1e6:.1f} us, "
          f"overhead {overhead_us:.1f} us per call")
    assert swiglu.cache.hits + swiglu.cache.misses == lookups  # The last signature, checked first.


def test_the_default_client_reads_kfuse_server_as_the_cli_does(monkeypatch):
    monkeypatch.setattr(kt, "_shared", {})
    monkeypatch.setenv("KFUSE_SERVER", "127.0.0.1:7999")
    monkeypatch.setenv("KFUSE_ADDRESS", "127.0.0.1:7888")
    assert kt._default_client().address == "127.0.0.1:7999"
    # The earlier name still serves where KFUSE_SERVER is not set.
    monkeypatch.setattr(kt, "_shared", {})
    monkeypatch.delenv("KFUSE_SERVER")
    assert kt._default_client().address == "127.0.0.1:7888"
