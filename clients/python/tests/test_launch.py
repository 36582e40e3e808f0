"""The launcher's GPU-free half: expressions, symbol binding, tensor checks
and precondition refusals; then a GPU launch where torch and a GPU exist."""
import ctypes
import weakref

import pytest

import kfuse
from kfuse import pb
from kfuse.launch import Buffer, bind_symbols, eval_expr, resolve
from conftest import example
from doubles import FakeDriver

E = pb.Expr


def c(v):
    return E(constant=v)


def s(i):
    return E(symbol=i)


def b(op, x, y):
    return E(binary=E.Binary(op=op, lhs=x, rhs=y))


@pytest.mark.parametrize("expr,want", [
    (c(7), 7), (s(1), 100),
    (b(E.OP_ADD, s(0), c(1)), 11), (b(E.OP_SUB, c(1), s(0)), -9),
    (b(E.OP_MUL, s(0), s(1)), 1000), (b(E.OP_CEIL_DIV, s(1), c(32)), 4),
    (b(E.OP_CEIL_DIV, c(96), c(32)), 3), (b(E.OP_CEIL_DIV, c(-5), c(2)), -2),
    (b(E.OP_CEIL_DIV, c(0), c(8)), 0),
    (b(E.OP_MIN, s(0), s(1)), 10), (b(E.OP_MAX, s(0), s(1)), 100),
])
def test_eval_expr(expr, want):
    assert eval_expr(expr, [10, 100]) == want


@pytest.mark.parametrize("expr,msg", [
    (E(), "empty"), (s(5), "symbol 5"), (b(E.OP_CEIL_DIV, c(1), c(0)), "ceil_div by 0"),
    (b(E.OP_MUL, c(1 << 62), c(4)), "overflows"), (b(99, c(1), c(1)), "unknown op"),
])
def test_eval_expr_errors(expr, msg):
    with pytest.raises(kfuse.LaunchError, match=msg):
        eval_expr(expr, [1])


def test_deep_expressions_are_refused():
    e = E()
    cur = e
    for _ in range(70):  # Built in place: protobuf's constructors copy with a depth limit.
        cur.binary.op = E.OP_ADD
        cur.binary.rhs.constant = 1
        cur = cur.binary.lhs
    cur.constant = 1
    with pytest.raises(kfuse.LaunchError, match="deeper"):
        eval_expr(e, [])


def _plan():
    """A plan as kfused writes one for relu_fma_f32_symbolic, plus one of
    each precondition kind on N."""
    plan = pb.KernelPlan(key="k")
    f32 = pb.DTYPE_F32
    for n in "abc":
        plan.inputs.add(name=n, dtype=f32, shape=[pb.Dim(symbol="N")])
    plan.outputs.add(name="out", dtype=f32, shape=[pb.Dim(symbol="N")])
    plan.symbols.add(name="N", sources=[pb.SymbolSource(input=i) for i in range(3)])
    k = plan.kernels.add(entry="kf_x", arch="sm_90")
    k.grid.x.CopyFrom(b(E.OP_CEIL_DIV, s(0), c(2048)))
    k.block.x.CopyFrom(c(256))
    for i in range(3):
        k.params.add(kind=pb.Param.KIND_BUFFER, buffer=pb.BufferRef(input=i))
    k.params.add(kind=pb.Param.KIND_BUFFER, buffer=pb.BufferRef(output=0))
    k.params.add(kind=pb.Param.KIND_SCALAR, value=s(0), scalar_dtype=pb.DTYPE_I64)
    P = pb.Precondition
    k.preconditions.add(kind=P.KIND_ALIGNED, buffer=pb.BufferRef(input=1), value=16,
                        description="input 1 is 16-byte aligned (vector access)")
    k.preconditions.add(kind=P.KIND_CONTIGUOUS, buffer=pb.BufferRef(output=0),
                        description="output 0 is contiguous")
    k.preconditions.add(kind=P.KIND_AT_MOST, expr=s(0), value=1 << 31, description="N fits 32 bits")
    k.preconditions.add(kind=P.KIND_AT_LEAST, expr=s(0), value=4, description="N >= 4")
    k.preconditions.add(kind=P.KIND_DIVISIBLE, expr=s(0), value=4, description="N % 4 == 0")
    return plan


def _bufs(n, ptr=0x10000, strides=(), dtype="f32"):
    ins = [Buffer(ptr + i * 0x100000, (n,), (), dtype) for i in range(3)]
    return ins, [Buffer(ptr + 0x400000, (n,), strides, dtype)]


def test_resolve_binds_symbols_and_evaluates_the_launch():
    cfg = resolve(_plan(), *_bufs(10000))
    assert cfg.symbols == [10000]
    k = cfg.kernels[0]
    assert k.grid == (5, 1, 1) and k.block == (256, 1, 1) and not k.empty
    assert k.params[:4] == [("buffer", ("input", 0)), ("buffer", ("input", 1)),
                            ("buffer", ("input", 2)), ("buffer", ("output", 0))]
    assert k.params[4] == ("i64", 10000)


def test_symbol_sources_must_agree():
    ins, outs = _bufs(16)
    ins[2] = Buffer(ins[2].ptr, (32,), (), "f32")
    with pytest.raises(kfuse.LaunchError, match=r"symbol 'N' is 16 from input 0 \('a'\).*32 from input 2"):
        bind_symbols(_plan(), ins)


@pytest.mark.parametrize("mutate,code,msg", [
    (lambda i, o: i.__setitem__(1, Buffer(i[1].ptr + 4, (16,), (), "f32")), "FAILED_PRECONDITION",
     r"kernel 0 requires input 1 is 16-byte aligned \(vector access\) \(address 0x[0-9a-f]+4 is not a multiple of 16\)"),
    (lambda i, o: o.__setitem__(0, Buffer(o[0].ptr, (16,), (2,), "f32")), "INVALID_ARGUMENT",
     r"output 0 \('out'\) must have strides \[1\]"),
    (lambda i, o: o.__setitem__(0, Buffer(o[0].ptr, (16,), (), "bf16")), "INVALID_ARGUMENT",
     "output 0 .* must be DTYPE_F32; got DTYPE_BF16"),
    (lambda i, o: o.__setitem__(0, Buffer(o[0].ptr, (8,), (), "f32")), "INVALID_ARGUMENT",
     r"must have shape \[16\]; got \[8\]"),
    (lambda i, o: i.pop(), "INVALID_ARGUMENT", "plan has 3 inputs; got 2"),
    # Dims that are not whole, or negative: a fractional grid, a skipped launch.
    (lambda i, o: i.__setitem__(0, Buffer(i[0].ptr, (16.5,), (), "f32")), "INVALID_ARGUMENT",
     r"shape \[16.5\] must hold whole numbers of at least 0"),
    (lambda i, o: o.__setitem__(0, Buffer(o[0].ptr, (-16,), (), "f32")), "INVALID_ARGUMENT",
     r"shape \[-16\] must hold whole numbers"),
    (lambda i, o: o.__setitem__(0, Buffer(o[0].ptr, (16,), (1.0,), "f32")), "INVALID_ARGUMENT",
     r"strides \[1.0\] must be whole numbers"),
])
def test_tensor_and_precondition_refusals(mutate, code, msg):
    ins, outs = _bufs(16)
    mutate(ins, outs)
    with pytest.raises(kfuse.LaunchError, match=msg) as e:
        resolve(_plan(), ins, outs)
    assert e.value.code == code


class _Cai:
    """An object with a __cuda_array_interface__ (strides in bytes)."""

    def __init__(self, ptr, shape, strides, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "strides": strides,
                                          "typestr": typestr, "version": 3}


def test_array_interface_strides_in_bytes_must_be_whole_elements():
    ins, outs = _bufs(16)
    outs[0] = _Cai(outs[0].ptr, (16,), (4,))
    assert resolve(_plan(), ins, outs).symbols == [16]
    # 5 bytes is no f32 stride: rounded down, it would read element 1 as 1.25.
    outs[0] = _Cai(outs[0].__cuda_array_interface__["data"][0], (16,), (5,))
    with pytest.raises(kfuse.LaunchError, match=r"strides \[5\] \(bytes\) are not whole <f4 elements") as e:
        resolve(_plan(), ins, outs)
    assert e.value.code == "INVALID_ARGUMENT"
    outs[0] = _Cai(0x400000, (16,), None)
    del outs[0].__cuda_array_interface__["data"]
    with pytest.raises(TypeError, match="has no data"):
        resolve(_plan(), ins, outs)


def test_a_read_only_array_is_refused_as_an_output_only():
    ins, outs = _bufs(16)
    ro = _Cai(ins[0].ptr, (16,), None)
    ro.__cuda_array_interface__["data"] = (ins[0].ptr, True)
    ins[0] = ro
    assert resolve(_plan(), ins, outs).symbols == [16]  # Read-only input: fine.
    outs[0] = _Cai(outs[0].ptr, (16,), None)
    outs[0].__cuda_array_interface__["data"] = (outs[0].__cuda_array_interface__["data"][0], True)
    with pytest.raises(kfuse.LaunchError, match="an output's __cuda_array_interface__ is read-only") as e:
        resolve(_plan(), ins, outs)
    assert e.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("n,msg", [(2, r"requires N >= 4 \(2 < 4\)"),
                                   (18, r"requires N % 4 == 0 \(18 is not a multiple of 4\)"),
                                   ((1 << 31) + 4, r"requires N fits 32 bits")])
def test_expression_preconditions(n, msg):
    with pytest.raises(kfuse.LaunchError, match=msg) as e:
        resolve(_plan(), *_bufs(n))
    assert e.value.code == "FAILED_PRECONDITION"


def test_contiguous_precondition_refuses_strided_output():
    plan = _plan()
    plan.outputs[0].ClearField("strides")
    plan.outputs[0].strides.append(2)  # Declared strided, but the kernel needs dense.
    with pytest.raises(kfuse.LaunchError, match="requires output 0 is contiguous"):
        resolve(plan, *_bufs(16, strides=(2,)))


def test_unknown_precondition_kind_is_refused():
    plan = _plan()
    plan.kernels[0].preconditions.add(kind=99, description="future")
    with pytest.raises(kfuse.LaunchError, match="unknown kind 99"):
        resolve(plan, *_bufs(16))


def test_empty_grid_is_marked_empty():
    plan = _plan()
    del plan.kernels[0].preconditions[3:]
    assert resolve(plan, *_bufs(0)).kernels[0].empty


def test_a_real_plan_resolves(client):
    plan = client.compile(kfuse.Chain.from_json(example("relu_fma_f32_symbolic.json"))).plan
    cfg = resolve(plan, *_bufs(1 << 20))
    assert cfg.symbols == [1 << 20] and cfg.kernels[0].grid[0] >= 1
    ins, outs = _bufs(1 << 20)
    ins[0] = Buffer(ins[0].ptr + 4, (1 << 20,), (), "f32")
    with pytest.raises(kfuse.LaunchError, match="launch refused: kernel 0 requires input 0"):
        resolve(plan, ins, outs)


class _Driver(FakeDriver):
    """FakeDriver recording launches, where device memory is the address
    ranges in `memory` (ordinal -> (start, end)) and anything else host
    memory (cuPointerGetAttribute: CUDA_ERROR_INVALID_VALUE); `loaded`
    holds the cubins loaded."""

    def __init__(self):
        super().__init__(record=True)
        self.loaded = []
        self.memory = {0: (0x10000, 0x1000000), 1: (0x2000000, 0x3000000)}

    def cuPointerGetAttribute(self, attribute, ptr):
        assert attribute == self.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        for ordinal, (start, end) in self.memory.items():
            if start <= ptr < end:
                return 0, ordinal
        return 1, 0

    def cuModuleLoadData(self, image):
        self.loaded.append(bytes(image))
        return super().cuModuleLoadData(image)


def test_launcher_refuses_memory_off_the_contexts_device():
    driver = _Driver()
    launcher = kfuse.Launcher(driver=driver)
    ins, outs = _bufs(16)
    launcher.launch(_plan(), ins, outs)
    assert len(driver.launches) == 1
    host = 0x7F0000000000
    cases = [
        (lambda i, o: i.__setitem__(1, Buffer(host, (16,), (), "f32")),
         r"input 1 \('b'\) at 0x7f0000000000 is not CUDA device memory"),
        (lambda i, o: o.__setitem__(0, Buffer(0x2000000, (16,), (), "f32")),
         r"output 0 \('out'\) is on CUDA device 1; the launch is on device 0"),
    ]
    for mutate, msg in cases:
        ins, outs = _bufs(16)
        mutate(ins, outs)
        for call in (lambda: launcher.launch(_plan(), ins, outs),  # Unbound: a new plan object.
                     lambda: launcher.bind(_plan(), ins, outs)):
            with pytest.raises(kfuse.LaunchError, match=msg) as e:
                call()
            assert e.value.code == "INVALID_ARGUMENT"
    # launch() of a plan it has bound checks every call's tensors ...
    plan = _plan()
    launcher.launch(plan, *_bufs(16))
    ins, outs = _bufs(16)
    ins[0] = Buffer(host, (16,), (), "f32")
    with pytest.raises(kfuse.LaunchError, match="input 0 .* is not CUDA device memory"):
        launcher.launch(plan, ins, outs)
    # ... and bind() checks against the device it binds for.
    with pytest.raises(kfuse.LaunchError, match="is on CUDA device 0; the launch is on device 1"):
        launcher.bind(plan, *_bufs(16), device=1)
    assert len(driver.launches) == 2
    # Empty tensors are not read: their address is not checked.
    plan = _plan()
    del plan.kernels[0].preconditions[3:]
    ins, outs = _bufs(0)
    ins[0] = Buffer(0, (0,), (), "f32")
    launcher.bind(plan, ins, outs)


def test_close_unloads_modules_and_stops_its_launches():
    driver = _Driver()
    launcher = kfuse.Launcher(driver=driver)
    plan = _plan()
    launcher.launch(plan, *_bufs(16))  # Context 1, current.
    on_device_1 = _bufs(16, ptr=0x2000000)
    bound = launcher.bind(plan, *on_device_1, device=1)  # Device 1's primary context, 2.
    ptrs = [b.ptr for b in on_device_1[0] + on_device_1[1]]
    assert bound.run(ptrs) is None and len(driver.launches) == 2
    loaded = [(0x100 * ctx + i + 1, ctx) for i, ctx in enumerate(driver.loads)]
    assert [ctx for _, ctx in loaded] == [1, 2]
    launcher.close()
    # Each module unloaded in its own context, the context made current for it.
    assert sorted(driver.unloads) == sorted(loaded) and driver.current == 1
    assert sorted(driver.synced) == [1, 2]  # Queued kernels finish before their modules go.
    assert driver.released == [1]  # Only the primary context it retained.
    refusal = bound.run(ptrs)
    assert refusal.code == "FAILED_PRECONDITION" and "closed" in str(refusal)
    for call in (lambda: launcher.launch(plan, *_bufs(16)),
                 lambda: launcher.bind(_plan(), *_bufs(16))):
        with pytest.raises(kfuse.LaunchError, match="this Launcher is closed") as e:
            call()
        assert e.value.code == "FAILED_PRECONDITION"
    assert len(driver.launches) == 2 and len(driver.loads) == 2
    launcher.close()  # Idempotent.
    assert len(driver.unloads) == 2 and driver.released == [1]


def test_close_reports_an_unload_the_driver_refuses_after_trying_every_one():
    class Refusing(_Driver):
        def cuModuleUnload(self, module):
            super().cuModuleUnload(module)
            return (201 if int(module) == 0x101 else 0,)  # CUDA_ERROR_INVALID_CONTEXT

    driver = Refusing()
    launcher = kfuse.Launcher(driver=driver)
    launcher.launch(_plan(), *_bufs(16))
    launcher.bind(_plan(), *_bufs(16, ptr=0x2000000), device=1)
    with pytest.raises(kfuse.LaunchError, match="close: cuModuleUnload: 201") as e:
        launcher.close()
    assert e.value.code == "INTERNAL"
    assert len(driver.unloads) == 2 and driver.released == [1]


def _scratch_plan():
    """_plan() with an intermediate of 4 bytes an element and a zeroed
    workspace of 512 bytes."""
    plan = _plan()
    plan.intermediates.add(bytes=b(E.OP_MUL, s(0), c(4)))
    k = plan.kernels[0]
    k.params.add(kind=pb.Param.KIND_BUFFER, buffer=pb.BufferRef(intermediate=0))
    k.params.add(kind=pb.Param.KIND_WORKSPACE, workspace_bytes=c(512), workspace_zeroed=True)
    return plan


def test_scratch_comes_from_the_launchers_own_pool_on_each_device():
    driver = _Driver()
    launcher = kfuse.Launcher(driver=driver)
    plan = _scratch_plan()
    for _ in range(3):
        launcher.launch(plan, *_bufs(16))
    on_device_1 = _bufs(16, ptr=0x2000000)
    bound = launcher.bind(plan, *on_device_1, device=1)
    assert bound.run([b.ptr for b in on_device_1[0] + on_device_1[1]]) is None
    # One pool a device, made at its first launch, holding what it reserved
    # across synchronizes (the default pool's threshold, 0, hands it back).
    assert [p.location.id for p, _ in driver.pools] == [0, 1]
    for props, attrs in driver.pools:
        assert props.location.type == driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        assert attrs == {driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: (1 << 64) - 1}
    assert driver.pool_of == [0x501] * 6 + [0x502] * 2  # Intermediate and workspace per launch.
    launcher.close()
    assert sorted(driver.destroyed) == [0x501, 0x502]


def test_scratch_from_the_callers_allocator():
    driver, calls, alive = _Driver(), [], weakref.WeakSet()

    class Keep:  # What the allocator's memory lives as; dropped once launched.
        pass

    def scratch(nbytes, device, stream):
        calls.append((nbytes, device, int(stream)))
        keep = Keep()
        alive.add(keep)
        return 0x900000 + 0x1000 * len(calls), keep

    driver.param_types = [ctypes.c_uint64] * 4 + [ctypes.c_int64] + [ctypes.c_uint64] * 2
    launcher = kfuse.Launcher(driver=driver, scratch=scratch)
    launcher.launch(_scratch_plan(), *_bufs(16), stream=7)
    assert calls == [(64, 0, 7), (512, 0, 7)] and len(alive) == 0
    assert driver.launches[-1]["params"][5:] == [0x901000, 0x902000]
    assert driver.pools == [] and driver.pool_of == []


def test_a_device_without_memory_pools_allocates_from_the_stream():
    class NoPools(_Driver):
        def cuMemPoolCreate(self, props):
            return 801, None  # CUDA_ERROR_NOT_SUPPORTED

    driver = NoPools()
    launcher = kfuse.Launcher(driver=driver)
    launcher.launch(_scratch_plan(), *_bufs(16))
    launcher.launch(_scratch_plan(), *_bufs(16))
    assert driver.pool_of == [None] * 4
    launcher.close()
    assert driver.destroyed == []


def test_launcher_as_a_context_manager_closes():
    driver = _Driver()
    with kfuse.Launcher(driver=driver) as launcher:
        launcher.launch(_plan(), *_bufs(16))
    assert driver.unloads == [(0x101, 1)] and driver.released == []
    # Nothing loaded: closing needs no driver (cuda.bindings not imported).
    with kfuse.Launcher():
        pass


def test_a_pinned_launcher_verifies_each_plan_content(kfused):
    pytest.importorskip("nacl", reason="PyNaCl is not installed")
    address, key = kfused
    with kfuse.Client(address, timeout=60, on_unavailable="raise", verify_key=key) as client:
        plan = client.compile(kfuse.Chain.from_json(example("relu_fma_f32_symbolic.json"))).plan
    n = 1 << 16
    bufs = [Buffer(0x10000 * (i + 1), (n,), (), "f32") for i in range(4)]
    driver = _Driver()
    launcher = kfuse.Launcher(pinned_key=key, driver=driver)
    launcher.bind(plan, bufs[:3], bufs[3:])
    again = pb.KernelPlan()
    again.CopyFrom(plan)
    launcher.launch(again, bufs[:3], bufs[3:])  # The same content: verified before.
    # Another cubin or grid under the genuine plan's key and signature.
    for tamper in (lambda k: setattr(k, "cubin", b"\x7fELF not the signed cubin"),
                   lambda k: k.grid.x.CopyFrom(E(constant=100000))):
        evil = pb.KernelPlan()
        evil.CopyFrom(plan)
        tamper(evil.kernels[0])
        assert (evil.key, evil.signature) == (plan.key, plan.signature)
        for call in (launcher.bind, launcher.launch):
            with pytest.raises(kfuse.KfuseError) as e:
                call(evil, bufs[:3], bufs[3:])
            assert e.value.code == "PERMISSION_DENIED"
    assert driver.loaded == [plan.kernels[0].cubin] and len(driver.launches) == 1


def test_launcher_without_cuda_bindings_says_how_to_install(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **kw):
        if name.startswith("cuda"):
            raise ImportError("no cuda")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match=r"kfuse\[cuda\]"):
        kfuse.Launcher().launch(_plan(), *_bufs(16))


def _gpu():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("cuda.bindings", reason="cuda-python (cuda.bindings) is not installed")
    return torch


def _relu_fma_plan(client, torch):
    """relu(a * b + c) over a symbolic length, compiled for this GPU."""
    cc = torch.cuda.get_device_capability()
    return client.compile(kfuse.Chain.from_json(example("relu_fma_f32_symbolic.json")),
                          target=cc[0] * 10 + cc[1]).plan


@pytest.mark.gpu
def test_gpu_launch_matches_torch(client):
    torch = _gpu()
    plan = _relu_fma_plan(client, torch)
    n = 1 << 20
    a, b_, c_ = (torch.randn(n, device="cuda") for _ in range(3))
    out = torch.empty_like(a)
    launcher = kfuse.Launcher()
    stream = torch.cuda.current_stream()
    launcher.launch(plan, [a, b_, c_], [out], stream=stream.cuda_stream)
    launcher.launch(plan, [a, b_, c_], [out], stream=stream.cuda_stream)
    torch.cuda.synchronize()
    assert launcher.cached_modules == 1
    torch.testing.assert_close(out, torch.relu(a * b_ + c_))
    launcher.close()  # Unloads the module through the real driver.
    assert launcher.cached_modules == 0
    out.zero_()
    with kfuse.Launcher() as again:
        again.launch(plan, [a, b_, c_], [out], stream=stream.cuda_stream)
        torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.relu(a * b_ + c_))


@pytest.mark.gpu
def test_gpu_launch_refuses_a_cpu_tensor(client):
    torch = _gpu()
    plan = _relu_fma_plan(client, torch)
    n = 1 << 20
    a = torch.randn(n)  # Host memory: launched, the kernel would fault and lose the context.
    b_, c_ = (torch.randn(n, device="cuda") for _ in range(2))
    out = torch.empty_like(b_)
    launcher = kfuse.Launcher()
    stream = torch.cuda.current_stream().cuda_stream
    with pytest.raises(kfuse.LaunchError, match="input 0 .* is not CUDA device memory") as e:
        launcher.launch(plan, [a, b_, c_], [out], stream=stream)
    assert e.value.code == "INVALID_ARGUMENT"
    launcher.launch(plan, [a.cuda(), b_, c_], [out], stream=stream)
    torch.cuda.synchronize()  # The context is intact.
    torch.testing.assert_close(out, torch.relu(a.cuda() * b_ + c_))


def test_a_machine_without_the_driver_is_a_launch_error(monkeypatch):
    """cuda.bindings raises a RuntimeError of its own at its first call where
    libcuda cannot be loaded; the launcher says so as a LaunchError."""
    import sys
    import types

    from kfuse import launch

    def missing():
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')

    driver = types.SimpleNamespace(cuDriverGetVersion=missing)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = driver
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)
    with pytest.raises(kfuse.LaunchError) as e:
        launch._driver()
    assert e.value.code == "UNAVAILABLE"
    assert "no NVIDIA driver to launch with" in str(e.value)
