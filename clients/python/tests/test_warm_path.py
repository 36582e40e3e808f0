"""The warm path of a kfuse.torch call through kfuse.Launcher, on a driver
double (no GPU, no kfused): no RPC, no lookup of the last signature and no
new argument arrays after the first call, each call's own addresses in the
kernel's parameters, calls unlike the last (dtype, shape, layout, device,
grad) taking the lookup, whether torch's tensor guard or the loop compares
them, a guard per kind of inputs (mode, requires_grad) and none kept
alive by it, signatures taking turns, ALIGNED preconditions still checked
per call (as resolve checks them), an input off them sent again from its
16-byte boundary (its own plan), size preconditions refused once,
another (or no) current context handled, outputs made on the inputs'
device, each in its own allocation, threads that share a bound launch, and
intermediates and workspaces allocated per call."""
import ctypes
import sys
import threading

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import kfuse  # noqa: E402
import kfuse.launch  # noqa: E402
import kfuse.torch as kt  # noqa: E402
from kfuse import pb  # noqa: E402
from bench_warm_path import PlanClient, make_plan  # noqa: E402
from doubles import FakeDriver  # noqa: E402

F = torch.nn.functional
E = pb.Expr


def _silu_mul(x, y):
    return F.silu(x) * y


def _add_rms(x, r, w):
    s = x + r
    return s, F.rms_norm(s, (s.shape[-1],), w, 1e-6)


def _types(n_buffers):
    return [ctypes.c_uint64] * n_buffers + [ctypes.c_int64]


def _fused(fn, tensors, driver, fallback="raise", plan=None):
    """(fused fn on the driver double, its launcher, the client double)."""
    client = PlanClient(plan if plan is not None else make_plan(fn, tensors))
    launcher = kfuse.Launcher(driver=driver)
    ff = kt.fuse(fn, client=client, launcher=launcher, fallback=fallback)
    ff.gpu_only = False
    return ff, launcher, client


@pytest.fixture(autouse=True)
def _fresh():
    kt.plans.clear()  # Plans are shared by chain: each test's client answers its own.
    yield
    kt.plans.clear()


@pytest.fixture
def resolves(monkeypatch):
    """Counts calls of kfuse.launch.resolve (the full contract check)."""
    calls = []
    real = kfuse.launch.resolve

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(kfuse.launch, "resolve", counting)
    return calls


def test_warm_calls_neither_compile_nor_bind_again(resolves):
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, client = _fused(_silu_mul, [x, y], driver)
    with torch.inference_mode():
        first = ff(x, y)
        checked, lookups = len(resolves), ff.cache.hits + ff.cache.misses
        outs = [ff(x, y) for _ in range(200)]
    assert client.calls == 1 and launcher.binds == 1
    assert len(resolves) == checked, "a warm call checked the whole contract again"
    assert driver.calls == 201
    assert ff.cache.hits + ff.cache.misses == lookups, "the last signature was looked up again"
    assert len({o.data_ptr() for o in outs[-2:]}) == 2  # Fresh outputs, alive together.
    for call, out in zip(driver.launches[1:], outs):
        ptrs = call["params"]
        assert ptrs[:3] == [x.data_ptr(), y.data_ptr(), out.data_ptr()]
        assert ptrs[3] == x.numel() and call["grid"] == (1, 1, 1) and call["block"] == (256, 1, 1)
    assert tuple(first.shape) == (4, 64) and first.dtype == torch.float32


def test_each_call_launches_on_its_own_addresses():
    driver = FakeDriver(record=True, param_types=_types(5))
    x, r, w = torch.randn(2, 32), torch.randn(2, 32), torch.randn(32)
    ff, launcher, _ = _fused(_add_rms, [x, r, w], driver)
    with torch.no_grad():
        for _ in range(3):
            x, r, w = torch.randn(2, 32), torch.randn(2, 32), torch.randn(32)
            s, n = ff(x, r, w)
            got = driver.launches[-1]["params"]
            assert got[:5] == [t.data_ptr() for t in (x, r, w, s, n)]
    assert launcher.binds == 1


def _misaligned_like(t, elements=1):
    """A tensor of t's shape and dtype (contiguous, so the same signature)
    whose address is `elements` past a 16-byte boundary."""
    base = torch.randn(t.numel() + 16, dtype=t.dtype)
    step = 16 // t.element_size()
    skip = (-base.data_ptr() // t.element_size()) % step + elements
    out = base[skip:skip + t.numel()].view(t.shape)
    assert out.is_contiguous() and out.data_ptr() % 16 == elements * t.element_size()
    return out


class _PhasingClient:
    """Answers a chain whose inputs are all sent as they are with `plan`,
    one that sends an input from the 16-byte boundary before it (a slice
    of a wider view of it) with a plan of the chain's own inputs that asks
    no alignment of that one (as kfused's windows do), or, where `refuse`,
    UNIMPLEMENTED. `chains` holds what it was asked."""

    def __init__(self, plan, refuse=False):
        self.plan, self.refuse, self.calls, self.address, self.chains = plan, refuse, 0, "stub", []

    def compile(self, chain, **kw):
        self.calls += 1
        proto = chain.to_proto()
        self.chains.append(proto)
        sliced = {op.args[0].input for op in proto.ops
                  if op.kind == pb.OP_SLICE and op.args[0].WhichOneof("kind") == "input"}
        if not sliced:
            return pb.CompileResponse(plan=self.plan)
        if self.refuse:
            raise kfuse.KfuseError("UNIMPLEMENTED", "op 0 (slice): not generated here")
        plan = pb.KernelPlan()
        plan.CopyFrom(self.plan)
        plan.key = f"phased {sorted(sliced)} {[list(i.shape) for i in proto.inputs]}"
        del plan.inputs[:]
        plan.inputs.extend(proto.inputs)
        k = plan.kernels[0]
        kept = [c for c in k.preconditions if not (c.kind == pb.Precondition.KIND_ALIGNED
                                                   and c.buffer.WhichOneof("kind") == "input"
                                                   and c.buffer.input in sliced)]
        del k.preconditions[:]
        k.preconditions.extend(kept)
        return pb.CompileResponse(plan=plan)


def _phased(fn, tensors, driver, fallback="raise", refuse=False):
    client = _PhasingClient(make_plan(fn, tensors), refuse)
    launcher = kfuse.Launcher(driver=driver)
    ff = kt.fuse(fn, client=client, launcher=launcher, fallback=fallback)
    ff.gpu_only = False
    return ff, launcher, client


def test_a_misaligned_input_is_launched_from_its_16_byte_boundary(resolves):
    """An address the plan cannot take (ALIGNED) is sent again as the view
    from the 16-byte boundary before it, sliced in the chain: that plan is
    compiled once, bound once, and launched with the boundary's address on
    warm calls; aligned calls go back to the first plan, another phase gets
    its own."""
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, client = _phased(_silu_mul, [x, y], driver)
    with torch.inference_mode():
        ff(x, y)
        bad = _misaligned_like(y)
        for _ in range(3):
            out = ff(x, bad)
            assert driver.launches[-1]["params"][:3] == [x.data_ptr(), bad.data_ptr() - 4, out.data_ptr()]
        assert client.calls == 2 and launcher.binds == 2
        sent = client.chains[1]
        assert [list(d.size for d in i.shape) for i in sent.inputs] == [[4, 64], [4, 65]]
        assert list(sent.inputs[1].strides) == [64, 1]
        slice_op = sent.ops[0]
        assert slice_op.kind == pb.OP_SLICE and slice_op.args[0].input == 1
        assert (slice_op.slice.axis, slice_op.slice.start, slice_op.slice.stop) == (1, 1, 65)
        out = ff(x, y)  # Aligned again: the first plan, at the tensor's own address.
        assert driver.launches[-1]["params"][:3] == [x.data_ptr(), y.data_ptr(), out.data_ptr()]
        out = ff(x, bad)
        assert driver.launches[-1]["params"][1] == bad.data_ptr() - 4
        assert client.calls == 2 and launcher.binds == 2 and driver.calls == 6
        other = _misaligned_like(y, 3)  # Another phase: a plan of its own.
        out = ff(x, other)
        assert driver.launches[-1]["params"][1] == other.data_ptr() - 12
        assert client.calls == 3 and launcher.binds == 3
        assert [d.size for d in client.chains[2].inputs[1].shape] == [4, 67]


def test_a_phased_input_keeps_its_strides_and_widens_its_unit_stride_dim():
    """A transpose (stride 1 along dim 0) one element past a boundary is
    sent widened by one along dim 0, at its own strides."""
    x = torch.randn(600)[1:513].view(64, 8).t()  # [8, 64] at strides (1, 8).
    assert x.data_ptr() % 16 == 4
    relu = lambda t: torch.relu(t)  # noqa: E731
    driver = FakeDriver(record=True, param_types=_types(2))
    ff, _, client = _phased(relu, [torch.randn(64, 8).t()], driver)
    with torch.inference_mode():
        ff(torch.randn(64, 8).t())
        ff(x)
    sent = client.chains[-1]
    assert [d.size for d in sent.inputs[0].shape] == [9, 64] and list(sent.inputs[0].strides) == [1, 8]
    assert (sent.ops[0].slice.axis, sent.ops[0].slice.start, sent.ops[0].slice.stop) == (0, 1, 9)
    assert driver.launches[-1]["params"][0] == x.data_ptr() - 4


def test_a_misaligned_input_runs_eagerly_where_no_plan_takes_it(resolves):
    """Where kfused cannot compile the chain sent from the boundary, the
    call runs eagerly, warned with the first plan's refusal (once), or
    raises it (fallback="raise"); the phased compile is asked once."""
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, client = _phased(_silu_mul, [x, y], driver, fallback="warn", refuse=True)
    with torch.inference_mode():
        ff(x, y)
        checked = len(resolves)
        bad = _misaligned_like(y)
        with pytest.warns(kfuse.FallbackWarning, match=r"requires input 1 is 16-byte aligned.*"
                          r"address 0x[0-9a-f]+ is not a multiple of 16\); running eagerly") as rec:
            got = ff(x, bad)
            again = ff(x, bad)
        assert len(rec) == 1
        torch.testing.assert_close(got, _silu_mul(x, bad))
        torch.testing.assert_close(again, _silu_mul(x, bad))
        assert driver.calls == 1, "a refused launch reached the driver"
        ff(x, y)  # Aligned again: launched on the same bound launch.
    assert driver.calls == 2 and launcher.binds == 1 and len(resolves) == checked
    assert client.calls == 2, "the phased signature was compiled again"

    strict, _, _ = _phased(_silu_mul, [x, y], FakeDriver(), refuse=True)
    with torch.inference_mode():
        strict(x, y)
        with pytest.raises(kfuse.LaunchError, match="requires input 1 is 16-byte aligned") as e:
            strict(x, _misaligned_like(y))
    assert e.value.code == "FAILED_PRECONDITION"


def test_a_size_precondition_refuses_the_signature_once(resolves):
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    plan = make_plan(_silu_mul, [x, y])
    plan.kernels[0].preconditions.add(kind=pb.Precondition.KIND_DIVISIBLE, expr=E(constant=256),
                                      value=1024, description="the size is a multiple of 1024")
    driver = FakeDriver()
    ff, launcher, _ = _fused(_silu_mul, [x, y], driver, fallback="warn", plan=plan)
    with torch.inference_mode():
        with pytest.warns(kfuse.FallbackWarning, match="multiple of 1024") as rec:
            for _ in range(5):
                torch.testing.assert_close(ff(x, y), _silu_mul(x, y))
    assert len(rec) == 1 and driver.calls == 0 and launcher.binds == 0
    assert len(resolves) == 1, "the refusal was not kept for the signature"


def test_a_call_without_the_bound_context_current_pushes_it():
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, current=3)
    ff, launcher, _ = _fused(_silu_mul, [x, y], driver)
    ff(x, y)
    for current in (0, 5):  # No context (a fresh thread), then another one.
        driver.current = current
        ff(x, y)
        assert driver.launches[-1]["context"] == 3 and driver.current == current
        assert not driver.stack
    assert launcher.binds == 1 and driver.loads == [3]


def test_a_device_binds_in_its_primary_context():
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, current=0)
    launcher = kfuse.Launcher(driver=driver)
    plan = make_plan(_silu_mul, [x, y])
    out = torch.empty(4, 64)
    bound = launcher.bind(plan, [x, y], [out], device=2)
    assert driver.loads == [3] and driver.current == 0  # Loaded in device 2's context, popped.
    assert bound.run([x.data_ptr(), y.data_ptr(), out.data_ptr()], stream=7) is None
    assert driver.launches[-1]["context"] == 3 and driver.launches[-1]["stream"] == 7


def test_threads_take_turns_at_a_bound_launch():
    n_threads, calls = 6, 60
    driver = FakeDriver(record=True, param_types=_types(3), pause=True)
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    ff, launcher, _ = _fused(_silu_mul, [x, y], driver)
    ff(x, y)
    inputs = [(torch.randn(4, 64), torch.randn(4, 64)) for _ in range(n_threads)]
    outs, idents = [[] for _ in range(n_threads)], [None] * n_threads
    start = threading.Barrier(n_threads)

    def worker(k):
        a, b = inputs[k]
        idents[k] = threading.get_ident()
        start.wait()
        for _ in range(calls):
            outs[k].append(ff(a, b))  # Kept alive: no address is reused.

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(driver.launches) == 1 + n_threads * calls and launcher.binds == 1
    for k in range(n_threads):
        want = [[inputs[k][0].data_ptr(), inputs[k][1].data_ptr(), o.data_ptr()] for o in outs[k]]
        got = [c["params"][:3] for c in driver.launches if c["thread"] == idents[k]]
        assert got == want, f"thread {k} launched on another call's addresses"


def test_intermediates_and_workspaces_are_allocated_per_call():
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    plan = make_plan(_silu_mul, [x, y])
    plan.intermediates.add(bytes=E(constant=4096))
    k = plan.kernels[0]
    k.params.add(kind=pb.Param.KIND_BUFFER, buffer=pb.BufferRef(intermediate=0))
    k.params.add(kind=pb.Param.KIND_WORKSPACE, workspace_bytes=E(constant=512), workspace_zeroed=True)
    driver = FakeDriver(record=True, param_types=_types(3) + [ctypes.c_uint64] * 2)
    memsets = []
    driver.cuMemsetD8Async = lambda p, v, n, s: memsets.append((int(p), n)) or (0,)
    ff, launcher, _ = _fused(_silu_mul, [x, y], driver, plan=plan)
    for _ in range(3):
        out = ff(x, y)
        got = driver.launches[-1]["params"]
        assert got[:3] == [x.data_ptr(), y.data_ptr(), out.data_ptr()]
        assert got[4] != 0 and got[5] != 0 and got[4] != got[5]
        assert memsets[-1] == (got[5], 512)
    assert driver.allocs == 6 and launcher.binds == 1


def test_bound_run_refuses_as_resolve_does(kfused):
    import conftest

    with kfuse.Client(kfused[0], timeout=60, on_unavailable="raise") as client:
        chain = kfuse.Chain.from_json(conftest.example("relu_fma_f32_symbolic.json"))
        plan = client.compile(chain).plan
    n = 1 << 16
    bufs = [kfuse.Buffer(0x10000 * (i + 1), (n,), (), "f32") for i in range(4)]
    bound = kfuse.Launcher(driver=FakeDriver()).bind(plan, bufs[:3], bufs[3:])
    ptrs = [b.ptr for b in bufs]
    assert bound.run(ptrs) is None
    ptrs[0] += 4
    refusal = bound.run(ptrs)
    misaligned = [kfuse.Buffer(ptrs[0], (n,), (), "f32")] + bufs[1:3]
    with pytest.raises(kfuse.LaunchError) as e:
        kfuse.resolve(plan, misaligned, bufs[3:])
    assert refusal.code == e.value.code == "FAILED_PRECONDITION"
    assert refusal.message == e.value.message


def test_launcher_launch_keeps_the_bound_launch_per_plan_layout_and_context():
    x, y, out = torch.randn(4, 64), torch.randn(4, 64), torch.empty(4, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    launcher = kfuse.Launcher(driver=driver)
    plan = make_plan(_silu_mul, [x, y])
    for _ in range(3):
        launcher.launch(plan, [x, y], [out])
    assert launcher.binds == 1 and driver.calls == 3
    launcher.launch(plan, [x, torch.randn(4, 64)], [out])  # New addresses, same layout.
    assert launcher.binds == 1
    assert driver.launches[-1]["params"][:3] != driver.launches[0]["params"][:3]
    driver.current = 9  # Another context: bound (and loaded) again, launched there.
    launcher.launch(plan, [x, y], [out])
    assert launcher.binds == 2 and driver.launches[-1]["context"] == 9
    copy = pb.KernelPlan()
    copy.CopyFrom(plan)  # Another plan object: bound again.
    launcher.launch(copy, [x, y], [out])
    assert launcher.binds == 3
    with pytest.raises(kfuse.LaunchError, match="must have shape"):
        launcher.launch(plan, [x, y], [torch.empty(4, 32)])


@pytest.fixture(params=["guard", "torch", "python"])
def fast_check(request, monkeypatch):
    """The fast signature check by torch's tensor guard, then by the loop
    with torch's size-and-stride check, then with the pure-Python one used
    where torch lacks it."""
    if request.param == "guard":
        if kt._tensor_guards is None:
            pytest.skip("this torch has no TensorGuards")
    else:
        monkeypatch.setattr(kt, "_tensor_guards", None)
    if request.param == "python":
        monkeypatch.setattr(kt, "_size_stride", kt._size_stride_py)
    elif kt._size_stride is kt._size_stride_py:
        pytest.skip("this torch has no assert_size_stride")
    return _counting_loop(monkeypatch, request.param)


def _counting_loop(monkeypatch, mode):
    """kfuse.torch's loop check wrapped to count its calls in `.loops`."""
    check = type("FastCheck", (), {"mode": mode, "loops": 0})()
    real = kt._like

    def counting(entry, args):
        check.loops += 1
        return real(entry, args)

    monkeypatch.setattr(kt, "_like", counting)
    return check


class PlansByShape:
    """A client double answering each compile with a plan made for the
    chain's own input dtypes, shapes and strides, counting calls."""

    def __init__(self, fn):
        self.fn, self.calls, self.address = fn, 0, "stub"

    def compile(self, chain, **kw):
        self.calls += 1
        tensors = []
        for t in chain.to_proto().inputs:
            dense = torch.empty([d.size for d in t.shape], dtype=kt._TORCH_DTYPES[t.dtype])
            tensors.append(dense.as_strided(dense.shape, list(t.strides)) if t.strides else dense)
        return pb.CompileResponse(plan=make_plan(self.fn, tensors, key=f"plan{self.calls}"))


def _by_shape(fn, driver, fallback="raise"):
    client = PlansByShape(fn)
    launcher = kfuse.Launcher(driver=driver)
    ff = kt.fuse(fn, client=client, launcher=launcher, fallback=fallback)
    ff.gpu_only = False
    return ff, launcher, client


def _lookups(ff):
    return ff.cache.hits + ff.cache.misses


def test_a_call_unlike_the_last_takes_the_lookup_and_stays_right(fast_check):
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, client = _by_shape(_silu_mul, driver, fallback="warn")
    with torch.inference_mode():
        ff(x, y)
        lookups = _lookups(ff)
        ff(x, y)
        assert _lookups(ff) == lookups, "the last signature was looked up"
        for args in [(x.double(), y.double()), (x[:2], y[:2])]:  # Another dtype, another shape.
            before = _lookups(ff)
            out = ff(*args)
            assert _lookups(ff) > before, f"{args[0].dtype} {list(args[0].shape)} took the fast check"
            got = driver.launches[-1]["params"]
            assert got[:3] == [args[0].data_ptr(), args[1].data_ptr(), out.data_ptr()]
            assert got[3] == args[0].numel() and out.dtype == args[0].dtype
        with pytest.warns(kfuse.FallbackWarning, match="takes 2 arguments; got 3"), \
                pytest.raises(TypeError):
            ff(x, y, x)  # Eager: the function itself refuses three.
        strided = torch.randn(64, 4).t()  # (4, 64), not contiguous: a plan of its strides.
        got = ff(x, strided)
        assert driver.launches[-1]["params"][:3] == [x.data_ptr(), strided.data_ptr(), got.data_ptr()]
        assert list(ff.plan_for(x, strided).inputs[1].strides) == [1, 4]
        launched = driver.calls
        with pytest.warns(kfuse.FallbackWarning, match="not fused"):
            ff(x, 2.0)
        assert driver.calls == launched
        out = ff(x, y)  # The first signature again: its plan, these addresses.
    assert driver.launches[-1]["params"][:4] == [x.data_ptr(), y.data_ptr(), out.data_ptr(), 256]
    assert client.calls == 4 and launcher.binds == 4  # f32, f64, the half-size and the strided one.


def test_signatures_taking_turns_launch_their_own_plans(fast_check):
    small, large = [torch.randn(2, 64) for _ in range(2)], [torch.randn(8, 64) for _ in range(2)]
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, client = _by_shape(_silu_mul, driver)
    with torch.inference_mode():
        for _ in range(3):
            for args in (small, large):
                out = ff(*args)
                got = driver.launches[-1]["params"]
                assert got[:3] == [args[0].data_ptr(), args[1].data_ptr(), out.data_ptr()]
                assert got[3] == args[0].numel() and out.shape == args[0].shape
    assert client.calls == 2 and launcher.binds == 2 and driver.calls == 6


def test_size_one_dims_with_any_stride_take_the_fast_check(fast_check):
    x, y = torch.randn(4, 1, 64), torch.randn(4, 1, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, _ = _fused(_silu_mul, [x, y], driver)
    odd = torch.randn(4, 64).as_strided((4, 1, 64), (64, 7, 1))  # Of y's kind.
    assert odd.is_contiguous()
    with torch.inference_mode():
        ff(x, y)
        ff(x, y)  # The guard, where torch has one, made here.
        lookups, loops = ff.cache.hits + ff.cache.misses, fast_check.loops
        out = ff(x, odd)
    assert ff.cache.hits + ff.cache.misses == lookups and launcher.binds == 1
    assert fast_check.loops == loops + (fast_check.mode != "guard"), "the guard refused a size-1 stride"
    assert driver.launches[-1]["params"][:3] == [x.data_ptr(), odd.data_ptr(), out.data_ptr()]


def test_outputs_are_allocated_by_name_where_another_device_is_current(monkeypatch):
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, _ = _fused(_silu_mul, [x, y], driver)
    ff(x, y)
    entry = ff._last
    # The entry as CUDA device 0's while the current device (here: the host)
    # is another: the first allocation lands elsewhere, so they are made again.
    monkeypatch.setattr(entry, "ordinal", 0)
    monkeypatch.setattr(kt, "_raw_stream", lambda ordinal: 40 + ordinal)
    named, real = [], kt._empty_any
    monkeypatch.setattr(kt, "_empty_any", lambda *a, device: named.append(device) or real(*a, device=device))
    out = ff(x, y)
    assert named == [entry.device] and launcher.binds == 1
    assert driver.launches[-1]["stream"] == 40
    assert driver.launches[-1]["params"][:3] == [x.data_ptr(), y.data_ptr(), out.data_ptr()]


def test_an_input_that_requires_grad_is_refused_after_warm_calls():
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver()
    ff, _, _ = _fused(_silu_mul, [x, y], driver)
    with torch.no_grad():
        ff(x, y)
    ff(x, y)  # Grad mode on, no input requires grad: launched.
    assert driver.calls == 2
    w = torch.randn(4, 64, requires_grad=True)
    with pytest.raises(NotImplementedError, match="inference-only"):
        ff(x, w)
    with torch.no_grad():
        ff(x, w)
    assert driver.calls == 3


def test_a_negative_view_runs_eagerly_after_warm_calls(fast_check):
    # torch._neg_view shares memory whose values are the negation of what it
    # reads as: launching on its address would read the wrong sign.
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver()
    ff, _, _ = _fused(_silu_mul, [x, y], driver, fallback="warn")
    with torch.inference_mode():
        ff(x, y)
        ff(x, y)
        neg = torch._neg_view(y)
        assert neg.is_neg()
        with pytest.warns(kfuse.FallbackWarning, match="negative or conjugate view"):
            got = ff(x, neg)
    assert driver.calls == 2
    torch.testing.assert_close(got, _silu_mul(x, -y))


def test_inputs_on_another_device_leave_the_fast_check():
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver()
    ff, _, _ = _fused(_silu_mul, [x, y], driver, fallback="warn")
    ff(x, y)
    meta = torch.empty(4, 64, device="meta")
    with pytest.warns(kfuse.FallbackWarning, match="different devices"), pytest.raises(Exception):
        ff(x, meta)  # Runs eagerly, where torch refuses the mix.
    assert driver.calls == 1


def _aligned_plan(alignments):
    """A one-kernel plan over three inputs and an output, buffer i with an
    ALIGNED precondition of alignments[i] (None: none)."""
    x = torch.randn(4, 64)
    plan = make_plan(lambda a, b, c: a + b + c, [x, x, x])
    k = plan.kernels[0]
    kept = [p for p in k.preconditions if p.kind != pb.Precondition.KIND_ALIGNED]
    del k.preconditions[:]
    k.preconditions.extend(kept)
    refs = [pb.BufferRef(input=i) for i in range(3)] + [pb.BufferRef(output=0)]
    for ref, a in zip(refs, alignments):
        if a is not None:
            k.preconditions.add(kind=pb.Precondition.KIND_ALIGNED, buffer=ref, value=a,
                                description=f"buffer {ref} is {a}-byte aligned")
    return plan


@pytest.mark.parametrize("alignments", [(16, 16, 16, 16), (16, 4, None, 256), (None, 8, 12, 16),
                                        (None, None, None, None)])
def test_bound_run_checks_each_buffers_alignment_as_resolve_does(alignments):
    import random

    plan = _aligned_plan(alignments)
    bufs = [kfuse.Buffer(0, (4, 64), (), "f32") for _ in range(4)]
    bound = kfuse.Launcher(driver=FakeDriver()).bind(plan, bufs[:3], bufs[3:])
    rng = random.Random(7)
    refused = 0
    for _ in range(300):
        ptrs = [0x7f0000000000 + rng.choice([0, 4, 8, 12, 16, 24, 256, 260]) * rng.randrange(1, 64)
                for _ in range(4)]
        got = bound.run(ptrs)
        placed = [kfuse.Buffer(p, (4, 64), (), "f32") for p in ptrs]
        try:
            kfuse.resolve(plan, placed[:3], placed[3:])
            want = None
        except kfuse.LaunchError as e:
            want = e.message
        assert (got.message if got is not None else None) == want, ptrs
        refused += got is not None
    assert refused > 0 or alignments == (None, None, None, None)


class _IdentityHandle:
    """A context handle that compares by identity, as a driver's may."""

    def __init__(self, value):
        self.value = value

    def __int__(self):
        return self.value


@pytest.mark.parametrize("handle", [int, _IdentityHandle])
def test_the_current_context_is_recognised_by_its_value(handle):
    driver = FakeDriver(record=True, current=3)
    driver.cuCtxGetCurrent = lambda: (0, handle(driver.current))
    pushes = []
    push = driver.cuCtxPushCurrent
    driver.cuCtxPushCurrent = lambda ctx: pushes.append(int(ctx)) or push(int(ctx))
    x, y, out = torch.randn(4, 64), torch.randn(4, 64), torch.empty(4, 64)
    bound = kfuse.Launcher(driver=driver).bind(make_plan(_silu_mul, [x, y]), [x, y], [out])
    ptrs = [x.data_ptr(), y.data_ptr(), out.data_ptr()]
    for _ in range(3):
        assert bound.run(ptrs) is None
    assert pushes == [] and [c["context"] for c in driver.launches] == [3] * 3
    driver.current = 5  # Another context current: pushed for the call.
    assert bound.run(ptrs) is None
    assert pushes == [3] and driver.launches[-1]["context"] == 3 and driver.current == 5


needs_guard = pytest.mark.skipif(kt._tensor_guards is None, reason="this torch has no TensorGuards")


@needs_guard
def test_calls_of_another_kind_get_a_guard_of_their_own(monkeypatch):
    x, y = torch.randn(4, 64), torch.randn(4, 64)
    driver = FakeDriver(record=True, param_types=_types(3))
    ff, launcher, _ = _fused(_silu_mul, [x, y], driver)
    check = _counting_loop(monkeypatch, "guard")
    ff(x, y)
    ff(x, y)  # Like the last: the loop accepts it, and a guard is made.
    assert check.loops == 1
    for _ in range(3):  # Fresh tensors of the signature: the guard alone.
        a, b = torch.randn(4, 64), torch.randn(4, 64)
        out = ff(a, b)
        assert driver.launches[-1]["params"][:3] == [a.data_ptr(), b.data_ptr(), out.data_ptr()]
    assert check.loops == 1
    with torch.inference_mode():  # Another kind (inference tensors, another mode): a guard of its own.
        a, b = torch.randn(4, 64), torch.randn(4, 64)
        for _ in range(3):
            out = ff(a, b)
            assert driver.launches[-1]["params"][:3] == [a.data_ptr(), b.data_ptr(), out.data_ptr()]
    assert check.loops == 2
    lookups = _lookups(ff)
    for k in range(2 * kt._GUARDS):  # Kinds taking turns: past _GUARDS guards, the loop alone.
        args = (a, b) if k % 2 else (x, y)
        with torch.inference_mode(k % 2 == 1):
            out = ff(*args)
        assert driver.launches[-1]["params"][:3] == [args[0].data_ptr(), args[1].data_ptr(), out.data_ptr()]
    assert ff._last.guard == kt._NO_GUARD and ff._last.guards_left == 0
    assert _lookups(ff) == lookups and launcher.binds == 1
    assert check.loops == 2 + 2 * kt._GUARDS


@needs_guard
def test_a_guard_for_inputs_that_require_grad_refuses_them_in_grad_mode():
    x = torch.randn(4, 64)
    w = torch.nn.Parameter(torch.randn(4, 64))
    driver = FakeDriver()
    ff, _, _ = _fused(_silu_mul, [x, w], driver)
    with torch.no_grad():
        for _ in range(3):  # A guard made for a Parameter, which requires grad.
            ff(x, w)
    assert ff._last.guard[0] is not None and ff._last.guard[1]
    with pytest.raises(NotImplementedError, match="inference-only"):
        ff(x, w)
    with torch.no_grad():
        ff(x, w)
    assert driver.calls == 4


@needs_guard
def test_a_guard_keeps_no_input_alive():
    import gc
    import weakref

    x, y = torch.randn(4, 64), torch.randn(4, 64)
    ff, _, _ = _fused(_silu_mul, [x, y], FakeDriver())
    for _ in range(3):
        ff(x, y)
    assert ff._last.guard[0] is not None
    gone = weakref.ref(x), weakref.ref(y)
    del x, y
    gc.collect()
    assert gone[0]() is None and gone[1]() is None


def test_outputs_of_a_call_have_storages_of_their_own():
    """Each output its own allocation: one resized or freed leaves the others be."""
    x, r, w = torch.randn(2, 32), torch.randn(2, 32), torch.randn(32)
    driver = FakeDriver(record=True, param_types=_types(5))
    ff, _, _ = _fused(_add_rms, [x, r, w], driver)
    with torch.inference_mode():
        for _ in range(3):
            s, n = ff(x, r, w)
        assert driver.launches[-1]["params"][3:5] == [s.data_ptr(), n.data_ptr()]
        assert s.untyped_storage().data_ptr() != n.untyped_storage().data_ptr()
        assert s.untyped_storage().nbytes() == n.untyped_storage().nbytes() == 2 * 32 * 4
        n.fill_(3.0)
        s.resize_(4, 32)
        s.fill_(1.0)
        s.untyped_storage().resize_(0)
        assert n.eq(3.0).all()
