"""scaled_dot_product_attention in kfuse.torch and kfuse.backend: the fx
call and the ATen attention ops translate to kfuse.chain.attention (two
matrix products around a max-subtracted softmax); the translated chain,
evaluated in float64 here, computes what torch's SDPA does (masks, causal,
scale, grouped query heads, rows masked whole); kfused compiles it to one
attention kernel; dropout and reading an untranslated output (the
log-sum-exp) are refused by name; the backend puts the attention op, in
its host and GPU ATen forms, into a region."""
import math
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import kfuse  # noqa: E402
import kfuse.backend as kb  # noqa: E402
import kfuse.torch as kt  # noqa: E402
from kfuse import pb  # noqa: E402
from doubles import CountingClient, kinds  # noqa: E402

F = torch.nn.functional
A = torch.ops.aten


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    kt.plans.clear()
    yield
    torch._dynamo.reset()


# ---------------------------------------------------------------------------
# A float64 evaluator of the ops these chains use, to compare with torch.

def _evaluate(chain, inputs):
    """The chain's outputs on `inputs` (torch tensors), every float in float64."""
    proto = chain.to_proto()
    vals = [t.double() if t.is_floating_point() else t for t in inputs]
    ops = []

    def arg(ref):
        return vals[ref.input] if ref.WhichOneof("kind") == "input" else ops[ref.op]

    binary = {pb.OP_ADD: torch.add, pb.OP_SUB: torch.sub, pb.OP_MUL: torch.mul, pb.OP_DIV: torch.div,
              pb.OP_EQ: torch.eq, pb.OP_NE: torch.ne, pb.OP_LT: torch.lt, pb.OP_LE: torch.le,
              pb.OP_GT: torch.gt, pb.OP_GE: torch.ge, pb.OP_LOGICAL_AND: torch.logical_and,
              pb.OP_LOGICAL_OR: torch.logical_or, pb.OP_MATMUL: torch.matmul,
              pb.OP_MAXIMUM: torch.maximum}
    unary = {pb.OP_EXP: torch.exp, pb.OP_LOG: torch.log, pb.OP_NEG: torch.neg,
             pb.OP_LOGICAL_NOT: torch.logical_not}
    for op in proto.ops:
        a = [arg(r) for r in op.args]
        k = op.kind
        if k == pb.OP_CONSTANT:
            v = torch.tensor(op.value, dtype=torch.float64)
        elif k in binary:
            v = binary[k](*a)
        elif k in unary:
            v = unary[k](*a)
        elif k == pb.OP_WHERE:
            v = torch.where(*a)
        elif k in (pb.OP_REDUCE_MAX, pb.OP_REDUCE_SUM):
            f = torch.amax if k == pb.OP_REDUCE_MAX else torch.sum
            v = f(a[0], list(op.reduce.axes), keepdim=op.reduce.keepdim)
        elif k == pb.OP_PERMUTE:
            v = a[0].permute(list(op.permute.perm))
        elif k in (pb.OP_RESHAPE, pb.OP_EXPAND):
            shape = [d.size for d in op.shape.shape]
            v = a[0].reshape(shape) if k == pb.OP_RESHAPE else a[0].expand(shape)
        elif k == pb.OP_IOTA:
            shape = [d.size for d in op.shape.shape]
            view = [1] * len(shape)
            view[op.axis.axis] = shape[op.axis.axis]
            v = torch.arange(shape[op.axis.axis]).view(view).expand(shape)
        elif k == pb.OP_CAST:
            v = a[0] if op.dtype in (pb.DTYPE_F32, pb.DTYPE_F16, pb.DTYPE_BF16, pb.DTYPE_F64) \
                else a[0].to(torch.bool if op.dtype == pb.DTYPE_BOOL else torch.int64)
        else:
            raise NotImplementedError(f"evaluator: {pb.OpKind.Name(k)}")
        ops.append(v)
    return [arg(o.value) for o in proto.outputs]


def _sdpa_f64(q, k, v, **kw):
    mask = kw.pop("attn_mask", None)
    if mask is not None and mask.is_floating_point():
        mask = mask.double()
    return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask, **kw)


def _qkv(b=2, h=4, hkv=4, lq=8, lk=8, d=16, dv=16, dtype=torch.float32):
    g = torch.Generator().manual_seed(7)
    return (torch.randn(b, h, lq, d, generator=g, dtype=dtype),
            torch.randn(b, hkv, lk, d, generator=g, dtype=dtype),
            torch.randn(b, hkv, lk, dv, generator=g, dtype=dtype))


def _bool_mask(lq, lk, dead_row=1):
    m = torch.rand(lq, lk, generator=torch.Generator().manual_seed(3)) > 0.4
    m[:, 0] = True
    m[dead_row] = False  # A row that attends to nothing: zeros, as SDPA gives.
    return m


def _float_mask(lq, lk, dead_row=2):
    m = torch.randn(lq, lk, generator=torch.Generator().manual_seed(5))
    m[0, 3] = -math.inf
    m[dead_row] = -math.inf
    return m


CASES = {  # name -> (fn of tensors, tensors, SDPA keyword arguments)
    "plain": ([], {}),
    "causal": ([], {"is_causal": True}),
    "scale": ([], {"scale": 0.3}),
    "bool_mask": (["bool"], {}),
    "float_mask": (["float"], {}),
    "grouped_heads": (["gqa"], {"is_causal": True, "enable_gqa": True}),
    "causal_longer_keys": (["lk12"], {"is_causal": True}),
}


def _case(name):
    extra, kw = CASES[name]
    q, k, v = _qkv(hkv=2 if "gqa" in extra else 4, lk=12 if "lk12" in extra else 8)
    tensors = [q, k, v]
    if "bool" in extra:
        tensors.append(_bool_mask(8, 8))
    if "float" in extra:
        tensors.append(_float_mask(8, 8))

    if len(tensors) == 4:
        def fn(q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    else:
        def fn(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, **kw)

    def want(q, k, v, *mask):
        return _sdpa_f64(q, k, v, **({"attn_mask": mask[0]} if mask else {}), **kw)

    return fn, tensors, want


@pytest.mark.parametrize("trace", ["fx", "aten"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sdpa_translates_to_one_attention_chain_computing_sdpa(name, trace):
    fn, tensors, want = _case(name)
    chain, nodes, tuple_out = kt.fuse(fn, trace=trace).chain_for(*tensors)
    ks = kinds(chain)
    assert ks.count("OP_MATMUL") == 2 and "OP_REDUCE_MAX" in ks and "OP_EXP" in ks
    assert not tuple_out and len(nodes) == len(ks)
    (got,) = _evaluate(chain, tensors)
    expect = want(*tensors)
    assert torch.isfinite(expect).all()
    torch.testing.assert_close(got, expect, rtol=1e-9, atol=1e-12)


def test_rows_masked_whole_are_zeros_as_in_torch():
    fn, tensors, want = _case("float_mask")
    chain, _, _ = kt.fuse(fn).chain_for(*tensors)
    (got,) = _evaluate(chain, tensors)
    assert (got[:, :, 2] == 0).all() and (want(*tensors)[:, :, 2] == 0).all()


def test_bf16_attention_keeps_torch_dtype_and_shape():
    q, k, v = _qkv(dtype=torch.bfloat16, dv=32)
    chain, _, _ = kt.fuse(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)).chain_for(q, k, v)
    (out,) = chain.to_proto().outputs
    value = chain.ops[out.value.op]
    assert value.dtype == pb.DTYPE_BF16 and tuple(value.shape) == (2, 4, 8, 32)


@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_dropout_is_refused_by_name_and_runs_eagerly(trace):
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.25)

    q, k, v = _qkv()
    if trace == "fx":
        with pytest.raises(kt.Unsupported, match=r"dropout_p=0\.25 is not translated"):
            kt.fuse(fn).chain_for(q, k, v)
    client = CountingClient(error=AssertionError("must not compile"))
    ff = kt.fuse(fn, client=client, trace=trace)
    ff.gpu_only = False
    with pytest.warns(kfuse.FallbackWarning, match="dropout" if trace == "fx" else "not supported"):
        out = ff(q, k, v)
    assert out.shape == q.shape and client.calls == 0


def test_a_mask_with_is_causal_and_grouped_heads_without_enable_gqa_are_refused():
    q, k, v = _qkv(hkv=2)
    with pytest.raises(kt.Unsupported):
        kt.fuse(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)).chain_for(q, k, v)
    q, k, v = _qkv()
    with pytest.raises(kt.Unsupported):
        kt.fuse(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, is_causal=True)) \
            .chain_for(q, k, v, _bool_mask(8, 8))


@pytest.mark.parametrize("name", ["plain", "causal", "bool_mask", "float_mask", "grouped_heads"])
def test_sdpa_compiles_to_one_attention_kernel(client, name):
    fn, tensors, _ = _case(name)
    tensors = [t.to(torch.bfloat16) if t.is_floating_point() else t for t in tensors]
    plan = kt.fuse(fn, client=client, mode="heuristic", fallback="raise").plan_for(*tensors)
    assert len(plan.kernels) == 1
    assert plan.kernels[0].variant.family == pb.FAMILY_ATTENTION, plan.kernels[0].partition_reason


# ---------------------------------------------------------------------------
# ATen forms (graphs traced here with symbolic_trace: the ops need no GPU to
# be traced, and translate runs them on meta tensors).

def _aten_graph(fn):
    return torch.fx.symbolic_trace(fn)


ATEN_FORMS = {
    "scaled_dot_product_attention": (
        lambda q, k, v: A.scaled_dot_product_attention.default(q, k, v, is_causal=True, scale=0.2),
        {"is_causal": True, "scale": 0.2}),
    "_scaled_dot_product_attention_math": (
        lambda q, k, v: A._scaled_dot_product_attention_math.default(q, k, v, None, 0.0, True)[0],
        {"is_causal": True}),
    "_scaled_dot_product_flash_attention": (
        lambda q, k, v: A._scaled_dot_product_flash_attention.default(q, k, v, 0.0, True, scale=0.2)[0],
        {"is_causal": True, "scale": 0.2}),
    "_scaled_dot_product_flash_attention_for_cpu": (
        lambda q, k, v: A._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0], {}),
    "_scaled_dot_product_efficient_attention": (
        lambda q, k, v: A._scaled_dot_product_efficient_attention.default(q, k, v, None, False)[0], {}),
    "_scaled_dot_product_cudnn_attention": (
        lambda q, k, v: A._scaled_dot_product_cudnn_attention.default(q, k, v, None, False, 0.0,
                                                                      True)[0],
        {"is_causal": True}),
}


@pytest.mark.parametrize("name", sorted(ATEN_FORMS))
def test_aten_attention_ops_translate(name):
    if not hasattr(A, name):
        pytest.skip(f"aten.{name} is not in torch {torch.__version__}")
    fn, kw = ATEN_FORMS[name]
    q, k, v = _qkv(dtype=torch.float16)
    gm = _aten_graph(fn)
    chain, _, _ = kt.translate(gm, [(t.dtype, tuple(t.shape)) for t in (q, k, v)])
    ks = kinds(chain)
    assert ks.count("OP_MATMUL") == 2 and "OP_REDUCE_MAX" in ks
    (got,) = _evaluate(chain, [q, k, v])
    torch.testing.assert_close(got, _sdpa_f64(q, k, v, **kw), rtol=1e-9, atol=1e-12)


def test_efficient_attention_bias_is_a_float_mask():
    q, k, v = _qkv(dtype=torch.float16)
    bias = _float_mask(8, 8).half().expand(2, 4, 8, 8)
    gm = _aten_graph(lambda q, k, v, b: A._scaled_dot_product_efficient_attention.default(
        q, k, v, b, False)[0])
    chain, _, _ = kt.translate(gm, [(t.dtype, tuple(t.shape)) for t in (q, k, v, bias)])
    (got,) = _evaluate(chain, [q, k, v, bias])
    torch.testing.assert_close(got, _sdpa_f64(q, k, v, attn_mask=bias), rtol=1e-9, atol=1e-12)


def test_reading_the_logsumexp_is_refused_naming_it():
    gm = _aten_graph(lambda q, k, v: A._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[1])
    q, k, v = _qkv()
    with pytest.raises(kt.Unsupported, match="output 1 of _scaled_dot_product_flash_attention_for_cpu "
                       "is not translated"):
        kt.translate(gm, [(t.dtype, tuple(t.shape)) for t in (q, k, v)])


def test_aten_dropout_is_refused_by_name():
    gm = _aten_graph(lambda q, k, v: A._scaled_dot_product_flash_attention.default(q, k, v, 0.1)[0])
    q, k, v = _qkv(dtype=torch.float16)
    with pytest.raises(kt.Unsupported, match=r"dropout_p=0\.1 is not translated"):
        kt.translate(gm, [(t.dtype, tuple(t.shape)) for t in (q, k, v)])


def test_safe_softmax_gives_zeros_for_rows_of_minus_infinity():
    x = torch.randn(3, 6, dtype=torch.float64)
    x[1] = -math.inf
    gm = _aten_graph(lambda x: A._safe_softmax.default(x, -1))
    chain, _, _ = kt.translate(gm, [(x.dtype, tuple(x.shape))])
    (got,) = _evaluate(chain, [x])
    torch.testing.assert_close(got, A._safe_softmax.default(x, -1))
    assert (got[1] == 0).all()


# ---------------------------------------------------------------------------
# The backend.

def _attention_then_scale(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2.0


def test_backend_region_includes_the_attention_op():
    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")))
    q, k, v = _qkv()
    with torch.no_grad():
        got = torch.compile(_attention_then_scale, backend=b)(q, k, v)
    torch.testing.assert_close(got, _attention_then_scale(q, k, v))
    (g,) = b.graphs
    (region,) = g.regions
    attention = [n for n in region.nodes if "attention" in n]
    assert attention, region.nodes
    ks = kinds(region.chain)
    assert ks.count("OP_MATMUL") == 2 and "OP_REDUCE_MAX" in ks and ks[-1] == "OP_MUL"
    assert not [n for n in g.eager if "attention" in n]
    (got64,) = _evaluate(region.chain, [q, k, v])
    torch.testing.assert_close(got64, _sdpa_f64(q, k, v, is_causal=True) * 2.0, rtol=1e-9,
                               atol=1e-12)


def test_backend_takes_the_cuda_flash_form_with_its_size_outputs():
    """aot_autograd's graph on a GPU has _scaled_dot_product_flash_attention,
    whose outputs include sizes and None: traced here with fake tensors."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(q, k, v):
        return A._scaled_dot_product_flash_attention.default(q, k, v, 0.0, True)[0] * 2.0

    q, k, v = _qkv(dtype=torch.bfloat16)
    gm = make_fx(fn, tracing_mode="fake")(q, k, v)
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b.compile_inference(gm)
    (g,) = b.graphs
    (region,) = g.regions
    assert "_scaled_dot_product_flash_attention" in region.nodes and g.eager == []
    ks = kinds(region.chain)
    assert ks.count("OP_MATMUL") == 2 and "OP_REDUCE_MAX" in ks


def test_backend_leaves_a_dropout_attention_eager():
    def fn(q, k, v):
        return A._scaled_dot_product_efficient_attention.default(q, k, v, None, False, 0.5)[0] * 2.0

    from torch.fx.experimental.proxy_tensor import make_fx

    q, k, v = _qkv(dtype=torch.float16)
    gm = make_fx(fn, tracing_mode="fake")(q, k, v)
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")), min_ops=1)
    b.compile_inference(gm)
    (g,) = b.graphs
    assert "_scaled_dot_product_efficient_attention" in g.eager
    assert all("attention" not in n for r in g.regions for n in r.nodes)
