"""kfuse.backend: the partition of aot_autograd's ATen graphs into fused
regions around eager ops (add + aten._fused_rms_norm as one), the region
chains, compiled outputs against eager (with a launcher double), plans
against a real kfused, the fallbacks (inference only, unreachable or
refusing server), the plan cache, and (marked gpu) a CUDA graph captured
from a warmed compiled function."""
import socket
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import kfuse  # noqa: E402
import kfuse.backend as kb  # noqa: E402
import kfuse.torch as kt  # noqa: E402
from kfuse import pb  # noqa: E402
from doubles import CountingClient, kinds  # noqa: E402

F = torch.nn.functional


_kinds = kinds


class RegionLauncher:
    """A launcher double for host tensors: checks the launch as the real
    launcher does, then writes the eager result of the region whose plan it
    is into the outputs."""

    def __init__(self):
        self.backend, self.launches = None, []

    def launch(self, plan, inputs, outputs, stream=0):
        kfuse.resolve(plan, inputs, outputs)
        region = next(r for r in self.backend.regions if r.cached_plan(*inputs) is plan)
        self.launches.append(region.nodes)
        for o, r in zip(outputs, region.gm(*inputs)):
            o.copy_(r)


def _host_backend(client, **kw):
    """A Backend whose host tensors take the launch path (RegionLauncher)."""
    launcher = RegionLauncher()
    b = kb.Backend(client=client, launcher=launcher, **kw)
    b.gpu_only = False
    launcher.backend = b
    return b, launcher


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    kt.plans.clear()
    yield
    torch._dynamo.reset()


def _mixed(x, y):
    a = torch.relu(x) * y
    c = torch.cumsum(a, -1)
    return torch.sigmoid(c) + x


def _sorted(x):
    a = torch.exp(x) * 2.0
    s = torch.sort(a, dim=-1).values
    return torch.tanh(s) - 1.0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_eager_op_splits_the_graph_into_two_regions():
    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")))
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with torch.no_grad():
        got = torch.compile(_mixed, backend=b)(x, y)
    torch.testing.assert_close(got, _mixed(x, y))
    (g,) = b.graphs
    assert [_kinds(r.chain) for r in g.regions] == [["OP_RELU", "OP_MUL"], ["OP_SIGMOID", "OP_ADD"]]
    assert g.eager == ["cumsum"]
    first, second = g.regions
    assert first.outputs == ["mul"] and second.inputs[0] == "cumsum"
    assert first.specs == [(torch.float32, (4, 8))] * 2


def test_a_multi_output_eager_op_splits_the_graph():
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    x = torch.randn(3, 16)
    with torch.no_grad():
        got = torch.compile(_sorted, backend=b)(x)
    torch.testing.assert_close(got, _sorted(x))
    (g,) = b.graphs
    assert [_kinds(r.chain) for r in g.regions] == [["OP_EXP", "OP_CONSTANT", "OP_MUL"],
                                                    ["OP_TANH", "OP_CONSTANT", "OP_SUB"]]
    assert g.eager[0] == "sort"


def _chunked_swiglu(h):
    a, b = h.chunk(2, dim=-1)
    return F.silu(a) * b


def test_a_split_and_its_pieces_join_one_region(client):
    counting = CountingClient(client)
    b, _ = _host_backend(counting, mode="heuristic", fallback="raise")
    h = torch.randn(4, 128)
    with torch.no_grad():
        got = torch.compile(_chunked_swiglu, backend=b)(h)
    torch.testing.assert_close(got, _chunked_swiglu(h))
    (g,) = b.graphs
    assert g.eager == []
    (region,) = g.regions
    kinds = _kinds(region.chain)
    assert kinds.count("OP_SLICE") == 2 and "OP_SILU" in kinds and kinds[-1] == "OP_MUL"


def test_add_and_fused_rms_norm_join_one_region(client):
    # torch.compile's graph of x + r and F.rms_norm on a GPU (torch 2.11):
    # aten._fused_rms_norm, its rstd unread.
    from test_torch_fuse import _add_fused_rms, _aten_graph

    specs = [(torch.float32, (4, 64)), (torch.float32, (4, 64)), (torch.float32, (64,))]
    gm = _aten_graph(_add_fused_rms(), specs)
    counting = CountingClient(client)
    b, launcher = _host_backend(counting, mode="heuristic", fallback="raise")
    compiled = b.compile_inference(gm)
    (g,) = b.graphs
    assert g.eager == []
    (region,) = g.regions
    assert region.nodes == ["add_tensor", "_fused_rms_norm_default", "getitem"]
    assert _kinds(region.chain) == ["OP_ADD", "OP_SQUARE", "OP_REDUCE_MEAN", "OP_CONSTANT", "OP_ADD",
                                    "OP_RSQRT", "OP_MUL", "OP_MUL"]
    x, r, w = torch.randn(4, 64), torch.randn(4, 64), torch.randn(64)
    with torch.no_grad():
        got = compiled(x, r, w)
    want = (x + r, torch.ops.aten._fused_rms_norm(x + r, [64], w, 1e-6)[0])
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e)
    assert counting.calls == 1 and launcher.launches == [region.nodes]


def test_a_read_rstd_leaves_fused_rms_norm_eager():
    from test_torch_fuse import _add_fused_rms, _aten_graph

    specs = [(torch.float32, (4, 64)), (torch.float32, (4, 64)), (torch.float32, (64,))]
    gm = _aten_graph(_add_fused_rms(read_rstd=True), specs)
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    b.compile_inference(gm)
    (g,) = b.graphs
    assert g.regions == [] and "_fused_rms_norm_default" in g.eager


def test_compiled_outputs_equal_eager(client):
    counting = CountingClient(client)
    b, launcher = _host_backend(counting, mode="heuristic", fallback="raise")
    f = torch.compile(_mixed, backend=b)
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    with torch.no_grad():
        got = f(x, y)
    torch.testing.assert_close(got, _mixed(x, y))
    assert launcher.launches == [["relu", "mul"], ["sigmoid", "add"]]
    assert counting.calls == 2


def test_a_second_call_with_the_same_shapes_makes_no_rpc(client):
    counting = CountingClient(client)
    b, launcher = _host_backend(counting, mode="heuristic")
    f = torch.compile(_mixed, backend=b)
    x, y = torch.randn(2, 32), torch.randn(2, 32)
    with torch.no_grad():
        f(x, y)
        calls = counting.calls
        got = f(x, y)
    assert calls == 2 and counting.calls == 2 and len(launcher.launches) == 4
    assert all(r.cache.hits >= 1 for r in b.regions)
    torch.testing.assert_close(got, _mixed(x, y))


def test_new_shapes_compile_again_and_stay_right(client):
    counting = CountingClient(client)
    b, launcher = _host_backend(counting, mode="heuristic")
    f = torch.compile(_mixed, backend=b)
    with torch.no_grad():
        for rows in (2, 3, 5):  # The second shape makes dynamo recompile with symbolic sizes.
            x, y = torch.randn(rows, 32), torch.randn(rows, 32)
            torch.testing.assert_close(f(x, y), _mixed(x, y))
    assert counting.calls == 6 and len(launcher.launches) == 6
    dynamic = b.graphs[-1].regions
    assert dynamic and all(r.chain is None and r.dynamic for r in dynamic)
    with torch.no_grad():
        for rows in (6, 7, 8):  # The bucket of 8, as 5 rows: the regions' plans, no RPC.
            x, y = torch.randn(rows, 32), torch.randn(rows, 32)
            torch.testing.assert_close(f(x, y), _mixed(x, y))
    assert counting.calls == 6 and len(launcher.launches) == 12


def test_linear_gelu_region_is_one_matmul_kernel(client):
    lin = torch.nn.Linear(64, 32).to(torch.bfloat16)
    b = kb.Backend(client=CountingClient(client), mode="heuristic", fallback="raise")
    f = torch.compile(lambda x: F.gelu(lin(x), approximate="tanh"), backend=b)
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        torch.testing.assert_close(f(x), F.gelu(lin(x), approximate="tanh"))
    (region,) = b.regions
    assert _kinds(region.chain) == ["OP_PERMUTE", "OP_MATMUL", "OP_ADD", "OP_GELU_TANH"]
    plan = region.plan_for(*[torch.randn(shape, dtype=dt) for dt, shape in region.specs])
    assert len(plan.kernels) == 1
    assert plan.kernels[0].variant.family == pb.FAMILY_MATMUL
    assert "epilogue (add, gelu_tanh)" in plan.kernels[0].partition_reason


class _Deep(torch.nn.Module):
    """`layers` of Linear(32, 32) and ReLU: two inputs a layer, so the whole
    graph would be one region of 2 * layers + 1 inputs."""

    def __init__(self, layers):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(layers))

    def forward(self, x):
        for lin in self.layers:
            x = torch.relu(lin(x))
        return x


def _within_limits(chain):
    c = chain.to_proto()
    return len(c.ops) <= kfuse.LIMITS["ops"] and len(c.inputs) <= kfuse.LIMITS["inputs"] and \
        len(c.outputs) <= kfuse.LIMITS["outputs"]


def test_a_graph_past_a_chains_limits_is_cut_into_regions_that_fit(client):
    # 48 layers: 97 inputs in one region, which kfused refuses (INVALID_ARGUMENT:
    # at most 64), so the whole model ran eagerly or raised.
    model = _Deep(48).to(torch.bfloat16).eval()
    counting = CountingClient(client)
    b, launcher = _host_backend(counting, mode="heuristic", fallback="raise")
    x = torch.randn(4, 32, dtype=torch.bfloat16)
    with torch.no_grad():
        got = torch.compile(model, backend=b)(x)
        want = model(x)
    torch.testing.assert_close(got, want)
    (g,) = b.graphs
    assert g.eager == [] and len(g.regions) >= 2
    assert all(_within_limits(r.chain) for r in g.regions)
    assert sum(_kinds(r.chain).count("OP_MATMUL") for r in g.regions) == 48
    assert counting.calls == len(g.regions) and len(launcher.launches) == len(g.regions)


def _compiled_on_the_host(fn, x):
    """The CompiledGraph of fn compiled by a backend that never compiles a
    plan (host tensors run eagerly), after checking its output."""
    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")))
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend=b)(x), fn(x))
    (g,) = b.graphs
    return g


def test_a_long_region_within_the_limits_is_not_cut():
    def long(x):
        for _ in range(100):
            x = torch.relu(x) * 0.5  # 200 compute ops, about 300 chain ops.
        return x

    (region,) = _compiled_on_the_host(long, torch.randn(4, 8)).regions
    assert _kinds(region.chain).count("OP_RELU") == 100


def test_a_region_whose_chain_is_too_long_is_cut_again():
    # 100 log-softmaxes: 100 compute ops, within the count a piece starts
    # from, but six chain ops each.
    def norms(x):
        for _ in range(100):
            x = torch.log_softmax(x, -1)
        return x

    g = _compiled_on_the_host(norms, torch.randn(4, 64))
    assert len(g.regions) >= 2 and all(_within_limits(r.chain) for r in g.regions)
    assert sum(_kinds(r.chain).count("OP_LOG") for r in g.regions) == 100


def test_translate_refuses_a_chain_past_the_limits():
    g = torch.fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(65)]
    g.output(tuple(g.call_function(torch.relu, (x,)) for x in xs))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    specs = [(torch.float32, (4,))] * 65
    with pytest.raises(kt.TooLarge, match=r"its chain has 65 inputs, more than kfused takes in one chain \(64\)"):
        kt.translate(gm, specs, "wide")


def test_grad_inputs_raise_inference_only():
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    f = torch.compile(_mixed, backend=b)
    x, y = torch.randn(4, 8, requires_grad=True), torch.randn(4, 8)
    with pytest.raises(NotImplementedError, match="inference-only"):
        f(x, y)
    assert not b.graphs
    with torch.no_grad():
        torch.testing.assert_close(f(x, y), _mixed(x, y))
    lin = torch.nn.Linear(8, 8)  # Its parameters require grad.
    g = torch.compile(lambda v: torch.relu(lin(v)) * 2.0, backend=b)
    with pytest.raises(NotImplementedError, match="inference-only"):
        g(torch.randn(2, 8))
    with torch.inference_mode():
        v = torch.randn(2, 8)
        torch.testing.assert_close(g(v), torch.relu(lin(v)) * 2.0)


def test_unreachable_server_runs_eagerly_with_one_warning():
    dead = kfuse.Client(f"127.0.0.1:{_free_port()}", timeout=5, on_unavailable="raise")
    b, launcher = _host_backend(dead)
    f = torch.compile(_mixed, backend=b)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with torch.no_grad(), pytest.warns(kfuse.FallbackWarning, match="unreachable") as rec:
        got = f(x, y)
        f(x, y)
    assert len(rec) == 1 and len(b.regions) == 2 and not launcher.launches
    torch.testing.assert_close(got, _mixed(x, y))
    strict, _ = _host_backend(dead, fallback="raise")
    torch._dynamo.reset()
    with torch.no_grad(), pytest.raises(kfuse.ServerUnavailable):
        torch.compile(_mixed, backend=strict)(x, y)


def _dequant(q, scale):
    return torch.sigmoid(q.float() / 255.0) * scale


def test_an_input_dtype_chains_lack_stays_eager():
    # A uint8 image normalised: the cast of the uint8 input stays eager,
    # what reads its float result is a region; the call never fails.
    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")))
    q, scale = torch.randint(0, 255, (4, 8), dtype=torch.uint8), torch.randn(8)
    with torch.no_grad():
        got = torch.compile(_dequant, backend=b)(q, scale)
    torch.testing.assert_close(got, _dequant(q, scale))
    (g,) = b.graphs
    assert g.regions and all(dt != torch.uint8 for r in g.regions for dt, _ in r.specs)


def test_unimplemented_region_runs_eagerly_warning_once_per_region():
    err = kfuse.KfuseError("UNIMPLEMENTED", "op 0 (relu): no generator for this chain")
    counting = CountingClient(error=err)
    b, launcher = _host_backend(counting)
    f = torch.compile(_mixed, backend=b)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with torch.no_grad(), pytest.warns(kfuse.FallbackWarning, match="no generator") as rec:
        got = f(x, y)
        f(x, y)
    assert len(rec) == 2 and counting.calls == 2 and not launcher.launches
    assert "region0" in str(rec[0].message) and "region1" in str(rec[1].message)
    torch.testing.assert_close(got, _mixed(x, y))


def test_single_op_regions_stay_eager_below_the_threshold():
    def f(x):
        return torch.relu(torch.cumsum(x, -1))

    x = torch.randn(4, 8)
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(f, backend=b)(x), f(x))
    assert b.graphs[0].regions == [] and b.graphs[0].eager == ["cumsum", "relu"]
    torch._dynamo.reset()
    one = kb.Backend(client=CountingClient(error=AssertionError("no compile")), min_ops=1)
    with torch.no_grad():
        torch.compile(f, backend=one)(x)
    assert [_kinds(r.chain) for r in one.regions] == [["OP_RELU"]]


def _crossing(p0, p1):
    r = torch.relu(p0)
    x = torch.sigmoid(p1)
    e = torch.cumsum(r, -1)
    q = x * e
    n = r + x
    return q, n


def test_partition_refuses_merges_that_close_a_cycle():
    # `n` reads r (region R) and x (region Q); Q also reads cumsum(r), so Q
    # follows R: n joining R would make R and Q wait for each other.
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(_crossing, tracing_mode="fake")(torch.randn(4, 8), torch.randn(4, 8))
    nodes = list(gm.graph.nodes)
    candidates = {n for n in nodes if n.op == "call_function" and "cumsum" not in str(n.target)}
    regions = kb.partition(nodes, candidates)
    assert [[n.name for n in m] for m in regions] == [["relu"], ["sigmoid", "mul", "add"]]
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")), min_ops=1)
    p0, p1 = torch.randn(4, 8), torch.randn(4, 8)
    with torch.no_grad():
        got = torch.compile(_crossing, backend=b)(p0, p1)
    for g, w in zip(got, _crossing(p0, p1)):
        torch.testing.assert_close(g, w)
    assert [r.nodes for r in b.regions] == [["relu"], ["sigmoid", "mul", "add"]]


def test_independent_ops_join_around_an_eager_op():
    def f(x, y):
        a = torch.relu(x)
        c = torch.cumsum(y, -1)
        return a * c + a

    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(f, backend=b)(x, y), f(x, y))
    (region,) = b.regions
    assert _kinds(region.chain) == ["OP_RELU", "OP_MUL", "OP_ADD"] and region.inputs == ["arg0_1", "cumsum"]


def test_registered_as_kfuse():
    assert torch._dynamo.lookup_backend("kfuse") is kb.backend
    x = torch.randn(4, 8)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")
        got = torch.compile(lambda v: F.silu(v) * 2.0, backend="kfuse")(x)
    torch.testing.assert_close(got, F.silu(x) * 2.0)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="fallback"):
        kb.Backend(fallback="maybe")
    with pytest.raises(ValueError, match="mode"):
        kb.Backend(mode="fast")
    with pytest.raises(ValueError, match="min_ops"):
        kb.Backend(min_ops=0)


# ---------------------------------------------------------------------------
# GPU: run with a kfused on a GPU machine (see clients/python/README.md).

def _gpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("cuda.bindings", reason="cuda-python (cuda.bindings) is not installed")


@pytest.mark.gpu
def test_gpu_cuda_graph_of_a_compiled_function(client):
    _gpu()
    counting = CountingClient(client)
    b = kb.Backend(client=counting, fallback="raise")
    f = torch.compile(_mixed, backend=b)
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randn(256, 1024, device="cuda")
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # Warm-up: compile, load the modules.
            for _ in range(3):
                f(x, y)
        torch.cuda.current_stream().wait_stream(side)
        calls = counting.calls
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = f(x, y)
        x.copy_(torch.randn_like(x))
        y.copy_(torch.randn_like(y))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, _mixed(x, y), atol=1e-4, rtol=1e-4)
    assert counting.calls == calls == 2
    assert all(len(r.cache) == 1 for r in b.regions) and len(b.regions) == 2


# Compute-bound products left to the framework (products="framework").


def _partitioned(fn, specs, **kw):
    """The CompiledGraph of fn's ATen graph (make_fx, fake tensors of
    `specs`: (dtype, shape) each) by a Backend that compiles no plan."""
    from torch.fx.experimental.proxy_tensor import make_fx

    args = [torch.empty(shape, dtype=dt) for dt, shape in specs]
    gm = make_fx(fn, tracing_mode="fake")(*args)
    kw.setdefault("client", CountingClient(error=AssertionError("no compile")))
    b = kb.Backend(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b.compile_inference(gm)
    (g,) = b.graphs
    return g


def _linear_gelu_mul(x, w, bias, y):
    return F.gelu(F.linear(x, w, bias), approximate="tanh") * y


def _linear_specs(rows, n=4096, k=4096, dt=torch.bfloat16):
    return [(dt, (rows, k)), (dt, (n, k)), (dt, (n,)), (dt, (rows, n))]


def test_a_compute_bound_product_is_left_to_the_framework_and_its_epilogue_fused():
    # 4096^3: 137 GFLOP over 96 MiB; kfuse's products at 0.63 of the tensor
    # ceiling take 339 us, the framework's at 1.08 198 us plus 16 us to store
    # the product and read it back for the GELU.
    g = _partitioned(_linear_gelu_mul, _linear_specs(4096))
    (addmm,) = [n for n in g.eager if n.startswith("addmm")]
    assert list(g.declined) == [addmm]
    why = g.declined[addmm]
    assert why.startswith("product of 137 GFLOP, compute-bound") and "339 us fused, 213 us by the framework" in why
    (region,) = g.regions
    assert _kinds(region.chain) == ["OP_GELU_TANH", "OP_MUL"] and addmm in region.inputs


def test_a_product_streaming_its_weights_stays_fused():
    # 16 rows: 0.54 GFLOP over 32 MiB of weights, 7.9 us of reads either way;
    # the fused epilogue saves the product's store and read.
    g = _partitioned(_linear_gelu_mul, _linear_specs(16))
    assert g.declined == {} and g.eager == []
    (region,) = g.regions
    assert _kinds(region.chain)[1:] == ["OP_MATMUL", "OP_ADD", "OP_GELU_TANH", "OP_MUL"]


def test_products_kfuse_keeps_a_compute_bound_product():
    client = CountingClient(error=AssertionError("no compile"))
    g = _partitioned(_linear_gelu_mul, _linear_specs(4096), client=client, products="kfuse")
    assert g.declined == {} and g.eager == [] and client.info_calls == 0
    (region,) = g.regions
    assert "OP_MATMUL" in _kinds(region.chain)


def test_the_decision_follows_the_devices_balance():
    # 512 rows: 17 GFLOP over 40 MiB. Declined at the nominal ceilings
    # (42 us fused against 27); kept where the copy bandwidth is a fifth as
    # high: the bytes set both times (49 us), the framework's 10 us more.
    assert list(_partitioned(_linear_gelu_mul, _linear_specs(512)).declined)
    slow = pb.Ceilings(copy_bytes_per_second=0.85e12, tensor_flops=644e12)
    g = _partitioned(_linear_gelu_mul, _linear_specs(512), client=CountingClient(
        error=AssertionError("no compile"), ceilings=slow))
    assert g.declined == {} and g.eager == []


def _attention_written_out(q, k, v):
    return torch.softmax(q @ k.transpose(-1, -2) * 0.088, dim=-1) @ v


def test_an_attention_written_out_keeps_its_products():
    # Each bmm alone would be declined (34 GFLOP over 272 MiB of scores:
    # 84 us at kfuse's rate, 64 us of bytes); beside the softmax they are one
    # attention kernel in kfused's plan, the scores never stored.
    specs = [(torch.bfloat16, (8, 4096, 128))] * 3
    g = _partitioned(_attention_written_out, specs)
    assert g.declined == {} and not [n for n in g.eager if "bmm" in n]
    (region,) = g.regions
    assert _kinds(region.chain).count("OP_MATMUL") == 2


def test_an_unmasked_attention_op_is_left_to_the_framework():
    A = torch.ops.aten

    def fn(q, k, v):
        return A._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, 0.0, True)[0] * 2.0

    specs = [(torch.bfloat16, (4, 32, 4096, 128))] * 3
    g = _partitioned(fn, specs, min_ops=1)
    (name,) = g.declined
    assert name.startswith("_scaled_dot_product_flash_attention_for_cpu") and name in g.eager
    assert g.declined[name].startswith("attention of 550 GFLOP")  # 4 B H S^2 D, halved: causal.
    (region,) = g.regions  # The scale after it, alone, reading the op's first output.
    assert region.nodes == ["mul"] and region.inputs == ["getitem"]
    assert "OP_MUL" in _kinds(region.chain)


def test_without_ceilings_nothing_is_declined_and_it_warns_once():
    from torch.fx.experimental.proxy_tensor import make_fx

    down = kfuse.ServerUnavailable("UNAVAILABLE", "kfused at 127.0.0.1:1 is unreachable")
    client = CountingClient(error=AssertionError("no compile"), ceilings=down)
    b = kb.Backend(client=client)

    def compile_one():
        args = [torch.empty(shape, dtype=dt) for dt, shape in _linear_specs(4096)]
        b.compile_inference(make_fx(_linear_gelu_mul, tracing_mode="fake")(*args))

    with pytest.warns(kfuse.FallbackWarning, match="gave no device ceilings"):
        compile_one()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile_one()  # Within the retry interval: not asked again, no second warning.
    assert client.info_calls == 1
    assert all(g.declined == {} and g.eager == [] for g in b.graphs)


@pytest.mark.gpu
def test_gpu_sdpa_math_form_fuses_its_mask_and_softmax(client):
    # SDPA on 3-D tensors is PyTorch's math path: float32 products, eager;
    # the upcasts with their scales, and the mask with the softmax, fused.
    _gpu()
    b = kb.Backend(client=CountingClient(client), fallback="raise", mode="heuristic")

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    args = [torch.randn(8, 520, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    with torch.inference_mode():
        got, want = torch.compile(sdpa, backend=b)(*args), sdpa(*args)
    torch.testing.assert_close(got, want, atol=0.02, rtol=0.02)
    assert any(n.startswith("_safe_softmax") for r in b.regions for n in r.nodes), b.graphs[0].summary()


def test_products_must_be_framework_or_kfuse():
    with pytest.raises(ValueError, match="products must be"):
        kb.Backend(products="cublas")


def _prenorm_attention(x, r, g, wqkv, wo):
    """A pre-norm transformer's attention sublayer after the residual
    stream's add (bf16, heads of 64)."""
    t, hd = x.shape
    s = x + r
    h = F.rms_norm(s, (hd,), g, 1e-6)
    q, k, v = (h @ wqkv).split(hd, dim=-1)
    # [batch, heads, tokens, 64]: on 3-D tensors SDPA is torch's math path.
    q, k, v = (z.view(1, t, hd // 64, 64).transpose(1, 2) for z in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return s + o.transpose(1, 2).reshape(t, hd) @ wo


@pytest.mark.gpu
def test_gpu_products_left_to_torch_beside_fused_regions(client):
    # On a GPU, aot_autograd's graph holds torch's fused attention op and
    # _fused_rms_norm: the products and the attention run eagerly, the add
    # and the norm as one region, and the whole matches eager.
    _gpu()
    b = kb.Backend(client=CountingClient(client), fallback="raise", mode="heuristic")
    f = torch.compile(_prenorm_attention, backend=b)
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    t, hd = 2048, 2048
    args = (torch.randn(t, hd, **bf16), torch.randn(t, hd, **bf16), 1 + 0.1 * torch.randn(hd, **bf16),
            torch.randn(hd, 3 * hd, **bf16) / hd ** 0.5, torch.randn(hd, hd, **bf16) / hd ** 0.5)
    with torch.inference_mode():
        got, want = f(*args), _prenorm_attention(*args)
    torch.testing.assert_close(got, want, atol=0.06, rtol=0.02)
    declined = {n for g in b.graphs for n in g.declined}
    assert sum(n.startswith("mm") for n in declined) == 2, declined
    assert any("attention" in n for n in declined), declined
    (region,) = b.regions
    assert any(n.startswith("_fused_rms_norm") for n in region.nodes), region.nodes
    assert not any(n.startswith(("mm", "bmm", "addmm")) for n in region.nodes), region.nodes


def test_a_cast_to_the_device_it_is_on_joins_the_region():
    # rms_norm's host decomposition casts back with _to_copy(dtype=,
    # layout=strided, device=cpu): one region with the norm and the scale.
    def f(x, g):
        return F.rms_norm(x, (64,), g, 1e-6) * 2

    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")))
    x, g = torch.randn(8, 64, dtype=torch.bfloat16), torch.randn(64, dtype=torch.bfloat16)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(f, backend=b)(x, g), f(x, g))
    (graph,) = b.graphs
    assert graph.eager == []
    (region,) = graph.regions
    assert _kinds(region.chain).count("OP_CAST") == 2 and _kinds(region.chain)[-1] == "OP_MUL"


def test_a_cast_to_another_device_stays_eager():
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x):
        moved = torch.ops.aten._to_copy.default(x * 2.0, dtype=torch.float32, device=torch.device("meta"))
        return moved + 1.0

    gm = make_fx(f, tracing_mode="fake")(torch.randn(4, 8, dtype=torch.bfloat16))
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")), min_ops=1)
    b.compile_inference(gm)
    (graph,) = b.graphs
    assert any(n.startswith("_to_copy") for n in graph.eager), graph.eager


def _rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class _LlamaLayer(torch.nn.Module):
    """A pre-norm decoder layer as Llama writes it (bias-free projections,
    RMSNorm, rotary embedding, causal SDPA, SwiGLU)."""

    def __init__(self, hidden, ff, head):
        super().__init__()
        self.hidden, self.head = hidden, head
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.q, self.k, self.v, self.o = (lin(hidden, hidden) for _ in range(4))
        self.gate, self.up, self.down = lin(hidden, ff), lin(hidden, ff), lin(ff, hidden)
        self.g1, self.g2 = torch.nn.Parameter(torch.ones(hidden)), torch.nn.Parameter(torch.ones(hidden))

    def forward(self, x, cos, sin):
        t, hd, d = x.shape[0], self.hidden, self.head
        h = F.rms_norm(x, (hd,), self.g1, 1e-6)
        q, k, v = (p(h).view(t, hd // d, d).transpose(0, 1) for p in (self.q, self.k, self.v))
        q, k = (z * cos + _rotate_half(z) * sin for z in (q, k))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(o.transpose(0, 1).reshape(t, hd))
        h = F.rms_norm(x, (hd,), self.g2, 1e-6)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def test_a_llama_layer_leaves_its_projections_to_torch_and_fuses_the_rest():
    # Traced on meta tensors (no data, no compute): the seven projections are
    # left to PyTorch; the norms with their casts, the rotary embedding (with
    # the upcast of SDPA's math form, which the meta device takes), the
    # causal mask (ones(L, S).tril()) with the softmax, and SwiGLU's silu *
    # up are fused. The math
    # form's products are float32, left to PyTorch too.
    layer = _LlamaLayer(1024, 2816, 128).to(device="meta", dtype=torch.bfloat16)
    x = torch.empty(1024, 1024, device="meta", dtype=torch.bfloat16)
    cos = sin = torch.empty(1024, 128, device="meta", dtype=torch.bfloat16)
    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    with torch.inference_mode():
        torch.compile(layer, backend=b)(x, cos, sin)
    (g,) = b.graphs
    assert sorted(g.declined) == sorted(n for n in g.eager if n.startswith("mm")) and len(g.declined) == 7
    ops = [[n.rsplit("_", 1)[0] if n[-1].isdigit() else n for n in r.nodes] for r in g.regions]
    norms = [r for r in ops if "rsqrt" in r]
    assert len(norms) == 2 and all(r.count("_to_copy") == 2 for r in norms), ops
    (attention,) = [r for r in ops if "_safe_softmax" in r]
    assert "bmm" not in attention and {"where", "ones", "tril"} <= set(attention), attention
    rotary = [r for r in ops if "cat" in r]
    assert len(rotary) == 2 and all({"neg", "_to_copy"} <= set(r) for r in rotary), ops
    assert all(g.why_eager[n].startswith("kfused generates products of float16") for n in g.eager
               if n.startswith("bmm")), g.summary()
    assert ["silu", "mul"] in ops, ops


def test_batch_norm_relu_and_the_residual_are_one_region():
    # A ResNet block's tail after its convolution: aten's
    # _native_batch_norm_legit_no_training (its saved statistics unread),
    # the ReLU and the residual's add.
    bn = torch.nn.BatchNorm2d(8).eval()
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.normal_()

    def f(x, r):
        return torch.relu(bn(x) + r)

    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")))
    x, r = torch.randn(2, 8, 5, 5), torch.randn(2, 8, 5, 5)
    with torch.inference_mode():
        torch.testing.assert_close(torch.compile(f, backend=b)(x, r), f(x, r))
    (g,) = b.graphs
    assert g.eager == []
    (region,) = g.regions
    assert region.nodes[0] == "_native_batch_norm_legit_no_training" and "OP_RSQRT" in _kinds(region.chain)


def test_add_layer_norm_and_gelu_are_one_region(client):
    # torch.compile's graph of nn.LayerNorm: native_layer_norm, its mean and
    # rstd unread (they ran eagerly, and so did the add and the GELU around
    # them, each alone).
    ln = torch.nn.LayerNorm(64).to(torch.bfloat16)

    def f(x, r):
        return F.gelu(ln(x + r), approximate="tanh")

    counting = CountingClient(client)
    b, launcher = _host_backend(counting, mode="heuristic", fallback="raise")
    x, r = torch.randn(8, 64, dtype=torch.bfloat16), torch.randn(8, 64, dtype=torch.bfloat16)
    with torch.inference_mode():
        torch.testing.assert_close(torch.compile(f, backend=b)(x, r), f(x, r))
    (g,) = b.graphs
    assert g.eager == []
    (region,) = g.regions
    assert region.nodes == ["add", "native_layer_norm", "getitem", "gelu"]
    assert counting.calls == 1 and launcher.launches == [region.nodes]
    (kernel,) = region.cached_plan(x, r, ln.weight, ln.bias).kernels
    assert kernel.variant.family == pb.FAMILY_ROW_REDUCTION


def test_a_clone_joins_the_region_of_its_readers():
    # Dropout in evaluation is aten.clone: alone no chain (its output would
    # be its input), it split BERT's output block (mul, clone eager); with
    # its readers it is an alias. A clone the graph returns stays eager.
    drop = torch.nn.Dropout(0.1).eval()

    def f(h, inp):
        return F.layer_norm(drop(h * 2) + inp, (64,))

    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")))
    h, inp = torch.randn(4, 64), torch.randn(4, 64)
    with torch.inference_mode():
        torch.testing.assert_close(torch.compile(f, backend=b)(h, inp), f(h, inp))
    (g,) = b.graphs
    assert g.eager == []
    (region,) = g.regions
    assert region.nodes == ["mul", "clone", "add", "native_layer_norm", "getitem"]

    b = kb.Backend(client=CountingClient(error=AssertionError("host tensors: no compile")), min_ops=1)
    with torch.inference_mode():
        got = torch.compile(lambda x: (x.exp(), x.exp().clone()), backend=b)(h)
    assert got[1].data_ptr() != got[0].data_ptr()
    (g,) = b.graphs
    assert "clone" in g.eager


def _math_attention(q, k, v, bias):
    """Attention as PyTorch's math path computes SDPA (3-D tensors, or any
    on the meta device): the operands upcast to float32 and scaled, the
    mask an additive bias, the scores through memory."""
    c = 64 ** -0.25
    s = (q.float() * c) @ (k.float().transpose(-2, -1) * c) + bias
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype)


def test_a_graph_with_nothing_to_fuse_runs_as_dynamo_captured_it():
    # No region: the captured graph itself, not aot_autograd's wrappers
    # around its ATen graph (tens of microseconds a call on the host).
    def f(x, w):  # Tuple outputs, as dynamo's graphs have them.
        return (torch.relu(x @ w),)

    b = kb.Backend(client=CountingClient(error=AssertionError("no compile")))
    gm = torch.fx.symbolic_trace(f)
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    with torch.inference_mode():
        run = b(gm, [x, w])
        assert run == gm.forward
        torch.testing.assert_close(run(x, w), f(x, w))
    (g,) = b.graphs
    assert g.regions == [] and g.why_eager["mm"].startswith("kfused generates products of float16")
    # With a region, aot_autograd's compiled function.
    gm = torch.fx.symbolic_trace(lambda x: (torch.exp(x * 2.0) + 1.0,))
    with torch.inference_mode():
        assert b(gm, [x]) != gm.forward
    assert len(b.graphs[-1].regions) == 1


def test_float32_products_are_left_to_torch_and_their_softmax_fused():
    # kfused's products take 16-bit operands: float32 ones run eagerly,
    # written-out attention or not; the mask and softmax between them are a
    # region.
    g = _partitioned(_math_attention, [(torch.bfloat16, (8, 256, 64))] * 3 + [(torch.float32, (256, 256))])
    products = [n for n in g.eager if n.startswith("bmm")]
    assert len(products) == 2, g.eager
    for n in products:
        assert g.why_eager[n] == "kfused generates products of float16 and bfloat16 operands only"
    assert any(any(n.startswith("_softmax") for n in r.nodes) for r in g.regions), g.summary()
    # The same attention in bfloat16 stays whole for kfused (one kernel).
    g = _partitioned(lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) * 0.125, -1) @ v,
                     [(torch.bfloat16, (8, 256, 64))] * 3)
    assert not any(n.startswith("bmm") for n in g.eager), g.summary()


def test_the_summary_says_why_each_op_runs_eagerly():
    def f(x, w, y):
        h = F.gelu(x @ w) * y        # mm declined (4096^3), gelu * y fused
        return torch.cumsum(h, -1), torch.relu(y).t()  # cumsum untranslated, t returned

    specs = [(torch.bfloat16, (4096, 4096))] * 3
    g = _partitioned(f, specs)
    why = g.why_eager
    assert set(why) == set(g.eager)
    assert why["mm"].startswith("left to PyTorch: product of 137 GFLOP") and list(g.declined) == ["mm"]
    assert why["cumsum"] == "kfuse.torch does not translate aten.cumsum.default"
    assert why["t"] == "a view the graph returns (it aliases its input)"
    assert why["relu"].startswith("a region of 1 compute op(s), below min_ops=2")
    text = g.summary()
    assert text.startswith("1 region(s) of 2 ATen node(s); 4 op(s) eager")
    assert "  eager: cumsum: kfuse.torch does not translate aten.cumsum.default" in text


def test_group_norm_and_silu_are_one_region(client):
    # A diffusion UNet's GroupNorm + SiLU: aten.native_group_norm (its mean
    # and rstd unread) and the SiLU, one region, planned as a row kernel
    # reading x in place for the groups' statistics and one pass after it.
    gn = torch.nn.GroupNorm(4, 16)

    def f(x):
        return F.silu(gn(x))

    counting = CountingClient(client)
    b, launcher = _host_backend(counting, mode="heuristic", fallback="raise")
    x = torch.randn(2, 16, 6, 6)
    with torch.inference_mode():
        torch.testing.assert_close(torch.compile(f, backend=b)(x), f(x))
    (g,) = b.graphs
    assert g.eager == []
    (region,) = g.regions
    assert region.nodes[0] == "native_group_norm"
    plan = region.cached_plan(x, gn.weight, gn.bias)
    assert [k.variant.family for k in plan.kernels] == [pb.FAMILY_ROW_REDUCTION, pb.FAMILY_POINTWISE]
