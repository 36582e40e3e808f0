"""Launching a KernelPlan on the caller's stream, following the launch
contract (docs/api.md): symbols bound from input shapes, every
precondition checked (a launch that would break one is refused with its
description), scratch allocated, kernels launched in order.

    launcher = kfuse.Launcher(pinned_key=None)
    launcher.launch(plan, [a, b, c], [out], stream=torch.cuda.current_stream().cuda_stream)

    bound = launcher.bind(plan, [a, b, c], [out], device=0)   # once per layout
    refusal = bound.run([a.data_ptr(), b.data_ptr(), c.data_ptr(), out.data_ptr()], stream)

Tensors are torch tensors, objects with __cuda_array_interface__, or
Buffer(ptr, shape, strides, dtype). resolve() is the GPU-free half (used by
tests); Launcher needs cuda.bindings (pip install 'kfuse[cuda]'), imported
on first launch, or a driver double. A Layout is what a launch is for one
signature of tensors (dtypes, shapes, strides), every address-free check
made; bind() turns it into a BoundLaunch: the tensors' memory checked to
be on the context's device (cuPointerGetAttribute: a CPU tensor would
fault and lose the context), modules loaded (cached per context and
sha256 of the cubin, locked on a miss only), grid, block, scalars fixed
and argument arrays built, so that run() checks the ALIGNED
preconditions, writes the addresses and calls cuLaunchKernel.
"""
import ctypes
import hashlib
import operator
import threading
import weakref
from dataclasses import dataclass, field

from kfuse.chain import dtype_of
from kfuse.errors import LaunchError
from kfuse.v1 import kfuse_pb2 as pb

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_MAX_DEPTH = 64
_DTYPE_BYTES = {pb.DTYPE_F32: 4, pb.DTYPE_F16: 2, pb.DTYPE_BF16: 2, pb.DTYPE_I32: 4,
                pb.DTYPE_BOOL: 1, pb.DTYPE_I64: 8, pb.DTYPE_F64: 8}
_TYPESTR = {"<f4": pb.DTYPE_F32, "<f2": pb.DTYPE_F16, "<i4": pb.DTYPE_I32, "|b1": pb.DTYPE_BOOL,
            "<i8": pb.DTYPE_I64, "<f8": pb.DTYPE_F64}


_from_bytes = int.from_bytes


def _invalid(msg):
    return LaunchError("INVALID_ARGUMENT", msg)


@dataclass
class Buffer:
    """A tensor in device memory: strides in elements (empty: dense)."""
    ptr: int
    shape: tuple
    strides: tuple = ()
    dtype: int = pb.DTYPE_UNSPECIFIED


def as_buffer(t, output=False):
    """A Buffer from a Buffer, a torch tensor or a __cuda_array_interface__
    (one marked read-only is refused as an `output`)."""
    if isinstance(t, Buffer):
        return _checked(Buffer(t.ptr, tuple(t.shape), tuple(t.strides), dtype_of(t.dtype)))
    if hasattr(t, "data_ptr") and hasattr(t, "stride"):  # torch (bf16 has no array interface)
        return _checked(Buffer(t.data_ptr(), tuple(t.shape), tuple(t.stride()), dtype_of(t.dtype)))
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is None:
        raise TypeError(f"cannot launch on a {type(t).__name__}: pass a torch tensor, an object "
                        "with __cuda_array_interface__, or kfuse.Buffer")
    if cai.get("typestr") not in _TYPESTR:
        raise TypeError(f"unsupported element type {cai.get('typestr')}")
    if not isinstance(cai.get("data"), tuple) or not cai["data"]:
        raise TypeError("__cuda_array_interface__ has no data: (pointer, read_only)")
    if output and len(cai["data"]) > 1 and cai["data"][1]:
        raise _invalid("an output's __cuda_array_interface__ is read-only (data[1] is True): "
                       "kernels would write it")
    dt = _TYPESTR[cai["typestr"]]
    strides = cai.get("strides")
    if strides:
        size = _DTYPE_BYTES[dt]
        # Strides are in bytes there: one that is not whole elements has no
        # element-stride form, and rounding it would read other elements.
        if any(not _is_int(s) or s % size for s in strides):
            raise _invalid(f"strides {list(strides)} (bytes) are not whole {cai['typestr']} elements of "
                           f"{size} bytes")
        strides = tuple(s // size for s in strides)
    return _checked(Buffer(cai["data"][0], tuple(cai["shape"]), tuple(strides or ()), dt))


def _is_int(v):
    """A whole number (int, numpy's integers), not a bool or a float."""
    if isinstance(v, bool):
        return False
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


def _checked(b):
    """b, whose dims are whole and not negative and whose strides are whole
    (a float or negative dim made a fractional grid or a skipped launch)."""
    if any(not _is_int(d) or d < 0 for d in b.shape):
        raise _invalid(f"shape {list(b.shape)} must hold whole numbers of at least 0")
    if any(not _is_int(s) for s in b.strides):
        raise _invalid(f"strides {list(b.strides)} must be whole numbers (elements)")
    return b


def eval_expr(e, symbols, _depth=0):
    """An Expr's value with symbol i bound to symbols[i]: int64 arithmetic,
    overflow an error, ceil_div by a positive divisor."""
    if _depth > _MAX_DEPTH:
        raise _invalid("plan expression nests deeper than 64")
    kind = e.WhichOneof("kind")
    if kind == "constant":
        return e.constant
    if kind == "symbol":
        if e.symbol >= len(symbols):
            raise _invalid(f"plan expression uses symbol {e.symbol} of {len(symbols)}")
        return symbols[e.symbol]
    if kind != "binary":
        raise _invalid("plan expression is empty")
    x = eval_expr(e.binary.lhs, symbols, _depth + 1)
    y = eval_expr(e.binary.rhs, symbols, _depth + 1)
    op = e.binary.op
    if op == pb.Expr.OP_ADD:
        r = x + y
    elif op == pb.Expr.OP_SUB:
        r = x - y
    elif op == pb.Expr.OP_MUL:
        r = x * y
    elif op == pb.Expr.OP_CEIL_DIV:
        if y <= 0:
            raise _invalid(f"plan expression: ceil_div by {y}")
        r = -((-x) // y)  # Ceiling for x > 0; truncation (as C) for x <= 0.
    elif op == pb.Expr.OP_MIN:
        r = min(x, y)
    elif op == pb.Expr.OP_MAX:
        r = max(x, y)
    else:
        raise _invalid(f"plan expression has unknown op {op}")
    if not _I64_MIN <= r <= _I64_MAX:
        raise _invalid("plan expression overflows int64")
    return r


def bind_symbols(plan, inputs):
    """Symbol values from the inputs' shapes; all sources must agree."""
    if len(inputs) != len(plan.inputs):
        raise _invalid(f"plan has {len(plan.inputs)} inputs; got {len(inputs)}")
    values = []
    for sym in plan.symbols:
        if not sym.sources:
            raise _invalid(f"plan symbol '{sym.name}' has no source among the inputs")
        value, first = None, ""
        for src in sym.sources:
            if src.input >= len(inputs) or src.axis >= len(inputs[src.input].shape):
                raise _invalid(f"plan symbol '{sym.name}' reads input {src.input} axis {src.axis}, "
                               "which the given inputs do not have")
            v = inputs[src.input].shape[src.axis]
            here = f"input {src.input} ('{plan.inputs[src.input].name}') axis {src.axis}"
            if value is not None and v != value:
                raise _invalid(f"symbol '{sym.name}' is {value} from {first} but {v} from {here}")
            if value is None:
                value, first = v, here
        values.append(value)
    return values


def _dense(shape):
    out, n = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = n
        n *= shape[d]
    return out


def _same_layout(shape, a, b):
    return all(shape[d] <= 1 or a[d] == b[d] for d in range(len(shape)))


@dataclass
class KernelLaunch:
    kernel: int
    grid: tuple
    block: tuple
    cluster: tuple
    dynamic_smem_bytes: int
    empty: bool
    params: list = field(default_factory=list)  # (kind, value) with kind "buffer"/"scalar"/...


@dataclass
class LaunchConfig:
    symbols: list
    intermediate_bytes: list
    kernels: list


def resolve(plan, inputs, outputs):
    """The GPU-free half of a launch: LaunchConfig, or LaunchError
    (INVALID_ARGUMENT: the tensors do not match; FAILED_PRECONDITION: a
    precondition fails, quoting its description)."""
    inputs = [as_buffer(t) for t in inputs]
    outputs = [as_buffer(t, output=True) for t in outputs]
    if len(outputs) != len(plan.outputs):
        raise _invalid(f"plan has {len(plan.outputs)} outputs; got {len(outputs)}")
    symbols = bind_symbols(plan, inputs)
    by_name = {s.name: i for i, s in enumerate(plan.symbols)}
    for what, specs, bufs in (("input", plan.inputs, inputs), ("output", plan.outputs, outputs)):
        for i, (spec, buf) in enumerate(zip(specs, bufs)):
            _check_tensor(f"{what} {i} ('{spec.name}')", spec, buf, symbols, by_name)
    inter = []
    for im in plan.intermediates:
        if im.HasField("bytes"):
            inter.append(eval_expr(im.bytes, symbols))
            continue
        n = _DTYPE_BYTES.get(im.dtype)
        if n is None:
            raise _invalid("plan intermediate has no valid dtype")
        for e in im.shape:
            d = eval_expr(e, symbols)
            if d < 0:
                raise _invalid("plan intermediate size is negative")
            n *= d
        inter.append(n)
    cfg = LaunchConfig(symbols, inter, [])
    for k, kernel in enumerate(plan.kernels):
        _check_preconditions(k, kernel, inputs, outputs, inter, symbols)
        cfg.kernels.append(_resolve_kernel(k, kernel, inputs, outputs, inter, symbols))
    return cfg


def _check_tensor(what, spec, buf, symbols, by_name):
    if buf.dtype != spec.dtype:
        raise _invalid(f"{what} must be {pb.DType.Name(spec.dtype)}; got "
                       f"{pb.DType.Name(buf.dtype) if buf.dtype in pb.DType.values() else buf.dtype}")
    if len(buf.shape) != len(spec.shape):
        raise _invalid(f"{what} must have rank {len(spec.shape)}; got shape {list(buf.shape)}")
    want = []
    for d, dim in enumerate(spec.shape):
        kind = dim.WhichOneof("kind")
        if kind == "size":
            want.append(dim.size)
        elif kind == "symbol":
            if dim.symbol not in by_name:
                raise _invalid(f"{what} dim {d} uses symbol '{dim.symbol}' the plan does not define")
            want.append(symbols[by_name[dim.symbol]])
        else:
            raise _invalid(f"{what} dim {d} is empty in the plan")
    if want != list(buf.shape):
        raise _invalid(f"{what} must have shape {want}; got {list(buf.shape)}")
    if buf.strides and len(buf.strides) != len(buf.shape):
        raise _invalid(f"{what} has {len(buf.strides)} strides for rank {len(buf.shape)}")
    declared = list(spec.strides) or _dense(buf.shape)
    actual = list(buf.strides) or _dense(buf.shape)
    if not _same_layout(buf.shape, actual, declared):
        raise _invalid(f"{what} must have strides {declared} (the kernel bakes them in); "
                       f"got {actual}")


def _slot(ref, inputs, outputs, inter):
    kind = ref.WhichOneof("kind")
    n = {"input": len(inputs), "output": len(outputs), "intermediate": len(inter)}.get(kind)
    if n is None or getattr(ref, kind) >= n:
        raise _invalid(f"plan refers to a missing buffer ({ref})")
    return kind, getattr(ref, kind)


def _check_preconditions(k, kernel, inputs, outputs, inter, symbols):
    P = pb.Precondition
    for p in kernel.preconditions:
        if p.kind in (P.KIND_ALIGNED, P.KIND_CONTIGUOUS):
            kind, i = _slot(p.buffer, inputs, outputs, inter)
            if kind == "intermediate":
                continue  # Ours: dense and 256-byte aligned.
            b = inputs[i] if kind == "input" else outputs[i]
            if p.kind == P.KIND_ALIGNED:
                if p.value <= 0:
                    raise _invalid("plan alignment is not positive")
                ok, detail = b.ptr % p.value == 0, f"address {b.ptr:#x} is not a multiple of {p.value}"
            else:
                actual = list(b.strides) or _dense(b.shape)
                ok = _same_layout(b.shape, actual, _dense(b.shape))
                detail = f"strides {actual} are not dense for shape {list(b.shape)}"
        elif p.kind in (P.KIND_AT_MOST, P.KIND_AT_LEAST, P.KIND_DIVISIBLE):
            v = eval_expr(p.expr, symbols)
            if p.kind == P.KIND_AT_MOST:
                ok, detail = v <= p.value, f"{v} > {p.value}"
            elif p.kind == P.KIND_AT_LEAST:
                ok, detail = v >= p.value, f"{v} < {p.value}"
            else:
                if p.value <= 0:
                    raise _invalid("plan divisor is not positive")
                ok, detail = v % p.value == 0, f"{v} is not a multiple of {p.value}"
        else:
            raise _invalid(f"kernel {k} has a precondition of unknown kind {p.kind} (a newer "
                           "server?): refusing to launch without checking it")
        if not ok:
            raise LaunchError("FAILED_PRECONDITION",
                              f"launch refused: kernel {k} requires {p.description} ({detail})")


def _dim3(d, has, symbols, what, limits):
    out = []
    for i, axis in enumerate("xyz"):
        e = getattr(d, axis)
        v = eval_expr(e, symbols) if has and e.WhichOneof("kind") else 1
        if not 0 <= v <= limits[i]:
            raise _invalid(f"{what} dim {i} is {v}, outside [0, {limits[i]}]")
        out.append(v)
    return tuple(out)


def _resolve_kernel(k, kernel, inputs, outputs, inter, symbols):
    where = f"kernel {k}"
    grid = _dim3(kernel.grid, kernel.HasField("grid"), symbols, where + " grid",
                 ((1 << 31) - 1, 65535, 65535))
    block = _dim3(kernel.block, kernel.HasField("block"), symbols, where + " block", (1024, 1024, 64))
    cluster = (_dim3(kernel.cluster, True, symbols, where + " cluster", (16, 16, 16))
               if kernel.HasField("cluster") else (0, 0, 0))
    threads = block[0] * block[1] * block[2]
    if not 1 <= threads <= 1024:
        raise _invalid(f"{where} block has {threads} threads; 1..1024 allowed")
    launch = KernelLaunch(k, grid, block, cluster, kernel.dynamic_smem_bytes, 0 in grid)
    Pm = pb.Param
    for p in kernel.params:
        if p.kind == Pm.KIND_BUFFER:
            launch.params.append(("buffer", _slot(p.buffer, inputs, outputs, inter)))
        elif p.kind == Pm.KIND_SCALAR:
            v = eval_expr(p.value, symbols)
            if p.scalar_dtype == pb.DTYPE_I32:
                if not -(1 << 31) <= v < (1 << 31):
                    raise _invalid(f"scalar parameter {v} does not fit the kernel's 32-bit argument")
                launch.params.append(("i32", v))
            elif p.scalar_dtype == pb.DTYPE_I64:
                launch.params.append(("i64", v))
            else:
                raise _invalid("plan scalar parameter is neither i32 nor i64")
        elif p.kind == Pm.KIND_WORKSPACE:
            n = eval_expr(p.workspace_bytes, symbols)
            if n < 0:
                raise _invalid("plan workspace size is negative")
            launch.params.append(("workspace", (n, p.workspace_zeroed)))
        elif p.kind == Pm.KIND_TENSOR_MAP:
            launch.params.append(("tensor_map", p.tensor_map))
        else:
            raise _invalid(f"plan parameter of unknown kind {p.kind} (a newer server?)")
    return launch


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise ImportError("launching plans needs cuda.bindings: pip install 'kfuse[cuda]' "
                          "(cuda-python, matching your driver's CUDA major version)") from e
    # cuda.bindings loads libcuda at its first call, and raises its own
    # RuntimeError where there is none: a LaunchError, as the driver's.
    try:
        driver.cuDriverGetVersion()
    except RuntimeError as e:
        raise LaunchError("UNAVAILABLE", f"no NVIDIA driver to launch with: {e}") from e
    return driver


def _check(result, call):
    err, *rest = result
    if int(err) != 0:
        raise LaunchError("INTERNAL", f"{call} failed: {err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)


class Layout:
    """The address-free half of a launch for one signature of inputs and
    outputs (dtypes, shapes, strides): the LaunchConfig with every check that
    does not read an address made, and the ALIGNED preconditions left to
    check per call. Buffers are numbered inputs first, then outputs."""

    def __init__(self, plan, inputs, outputs):
        ins = [_no_address(as_buffer(t)) for t in inputs]
        outs = [_no_address(as_buffer(t, output=True)) for t in outputs]
        self.plan = plan
        self.config = resolve(plan, ins, outs)  # Address 0 is aligned to anything.
        self.buffers = len(ins) + len(outs)
        self.aligned = []  # (buffer number, alignment, kernel, description)
        P = pb.Precondition
        for k, kernel in enumerate(plan.kernels):
            for p in kernel.preconditions:
                if p.kind == P.KIND_ALIGNED:
                    kind, i = _slot(p.buffer, ins, outs, self.config.intermediate_bytes)
                    if kind != "intermediate":
                        self.aligned.append((i if kind == "input" else len(ins) + i, p.value, k,
                                             p.description))
        # Power-of-two alignments (all kfused writes) as one mask per buffer;
        # `general` the others.
        self.masks = [0] * self.buffers
        self.general = []
        for i, a, _, _ in self.aligned:
            if a & (a - 1) == 0:
                self.masks[i] |= a - 1
            else:
                self.general.append((i, a))

    def refusal(self, ptrs):
        """None, or the LaunchError (FAILED_PRECONDITION, not raised) of the
        first ALIGNED precondition the addresses `ptrs` (one per buffer)
        break."""
        if any(map(operator.and_, ptrs, self.masks)) or (
                self.general and any(ptrs[i] % a for i, a in self.general)):
            for i, a, k, description in self.aligned:
                if ptrs[i] % a:
                    return LaunchError("FAILED_PRECONDITION",
                                       f"launch refused: kernel {k} requires {description} "
                                       f"(address {ptrs[i]:#x} is not a multiple of {a})")
        return None


def _no_address(b):
    return Buffer(0, b.shape, b.strides, b.dtype)


class BoundLaunch:
    """A plan bound to a Layout and to one CUDA context: functions loaded,
    grid, block, scalars and shared memory fixed, and argument arrays in
    which only the addresses change. run(ptrs, stream) launches, with the
    context made current for the call if another (or none) is. Safe from
    several threads without a lock: a call takes a set of argument arrays
    from a free list (a new set when every one is in use, as when threads
    launch at once) and gives it back after the launch."""

    def __init__(self, cu, context, device, layout, kernels, scratch, n_slots, keep, memory):
        self.layout, self.plan, self.context = layout, layout.plan, int(context)
        self.device = device  # The context's device ordinal.
        self._cu, self._ctx, self._launch = cu, context, cu.cuLaunchKernel
        self._current = cu.cuCtxGetCurrent
        self._ok = getattr(getattr(cu, "CUresult", None), "CUDA_SUCCESS", 0)
        # Handles that compare by value (cuda.bindings' do) are compared as
        # they come; others through int().
        self._by_value = _compares_by_value(context)
        self._template = kernels  # (entry, f, gx, gy, gz, bx, by, bz, smem, [slot or scalar], memsets)
        self._scratch = scratch   # (slot, bytes) allocated per call: intermediates, workspaces
        self._memory = memory     # Where they come from: a _Scratch.
        self._n, self._n_slots = layout.buffers, n_slots
        self._keep = keep         # The scalars the argument arrays point to.
        # The power-of-two alignments as one integer, the masks' bytes laid
        # out as the slots': the slots' bytes read the same way and ANDed
        # with it give 0 when every address is aligned (any byte order).
        masks = (ctypes.c_uint64 * max(n_slots, 1))(*layout.masks)
        self._mask, self._general = int.from_bytes(masks, "little"), bool(layout.general)
        self._free = [self._arguments()]  # Argument sets not in use.
        self._streams = {}
        # What run() reads, in one attribute.
        self._hot = (self._free, self._n, self._mask, self._general, self._streams, self._current,
                     self._ctx, self._by_value, self._scratch, self._launch, self._ok)

    def _arguments(self):
        """A new set of argument arrays: the slots (one c_uint64 per buffer,
        intermediate and workspace), the kernels' launch tuples, whose
        &params point into them, a view of the slots' bytes, the arrays."""
        slots = (ctypes.c_uint64 * max(self._n_slots, 1))()
        base, width = ctypes.addressof(slots), ctypes.sizeof(ctypes.c_uint64)
        kernels, arrays = [], []
        for entry, f, gx, gy, gz, bx, by, bz, smem, params, memsets in self._template:
            addresses = [base + width * p if isinstance(p, int) else ctypes.addressof(p) for p in params]
            array = (ctypes.c_void_p * max(len(addresses), 1))(*addresses)
            arrays.append(array)
            kernels.append((entry, f, gx, gy, gz, bx, by, bz, smem, ctypes.addressof(array), memsets))
        return slots, tuple(kernels), memoryview(slots), arrays

    def run(self, ptrs, stream=0):
        """Launches with buffer addresses `ptrs` (inputs then outputs) on
        `stream` (an int handle or a CUstream). Returns None, or, with
        nothing launched, the LaunchError (FAILED_PRECONDITION) of an ALIGNED
        precondition the addresses break; raises LaunchError (INTERNAL) when
        the driver fails; after its Launcher's close(), returns a
        LaunchError (FAILED_PRECONDITION): its functions are unloaded."""
        hot = self._hot
        if hot is None:
            return LaunchError("FAILED_PRECONDITION", "the Launcher that bound this plan is closed")
        free, n, mask, general, streams, current, ctx, by_value, scratch, launch, ok = hot
        try:
            args = free.pop()
        except IndexError:  # Every set is in use (other threads are launching).
            args = self._arguments()
        try:
            slots, kernels, view, _ = args
            slots[:n] = ptrs
            if mask and _from_bytes(view, "little") & mask or general:
                refusal = self.layout.refusal(ptrs)
                if refusal is not None:
                    return refusal
            s = streams.get(stream)
            if s is None:
                s = self._stream(stream)
            current = current()[1]
            other = current != ctx if by_value else int(current) != self.context
            if other or scratch:
                return self._run_general(slots, kernels, s, other)
            for entry, f, gx, gy, gz, bx, by, bz, smem, params, _ in kernels:
                err, = launch(f, gx, gy, gz, bx, by, bz, smem, s, params, 0)
                if err != ok:
                    raise LaunchError("INTERNAL", f"cuLaunchKernel({entry}) failed: {err!r}")
        finally:
            free.append(args)
        return None

    def _run_general(self, slots, kernels, s, push):
        """run with scratch allocations, or in a context pushed for the call."""
        cu, memory, held = self._cu, self._memory, []
        if push:
            _check(cu.cuCtxPushCurrent(self._ctx), "cuCtxPushCurrent")
        try:
            for slot, n in self._scratch:
                p, token = memory.alloc(max(n, 1), self.device, s)
                held.append(token)
                slots[slot] = p
            for entry, f, gx, gy, gz, bx, by, bz, smem, params, memsets in kernels:
                for slot, n in memsets:
                    _check(cu.cuMemsetD8Async(slots[slot], 0, n, s), "cuMemsetD8Async")
                _check(self._launch(f, gx, gy, gz, bx, by, bz, smem, s, params, 0),
                       f"cuLaunchKernel({entry})")
        finally:
            for token in held:  # Stream-ordered: reused once the kernels are done.
                memory.free(token, s)
            if push:
                cu.cuCtxPopCurrent()
        return None

    def _stream(self, stream):
        cu = self._cu
        s = stream if isinstance(stream, cu.CUstream) else cu.CUstream(int(stream))
        if type(stream) is int:
            if len(self._streams) >= 64:
                self._streams.clear()
            self._streams[stream] = s
        return s


class _Scratch:
    """Where a Launcher's scratch memory (intermediates, workspaces) comes
    from. By default a stream-ordered pool of the Launcher's own on each
    device, which keeps what it reserved until close(): the device's default
    pool hands its memory back at every synchronize, so a launch after one
    would map it anew. With `allocator`, the caller's memory (see Launcher)."""

    _NOT_SUPPORTED = 801  # CUDA_ERROR_NOT_SUPPORTED: a device without memory pools.

    def __init__(self, driver, allocator):
        self._driver, self._allocator = driver, allocator
        self._lock = threading.Lock()
        self._pools = {}  # device ordinal -> its pool, or None without pools

    def alloc(self, n, device, stream):
        """(address, token) of `n` bytes for a launch on `stream`; the token
        goes to free() once the launch's kernels are enqueued."""
        if self._allocator is not None:
            address, keep = self._allocator(n, device, stream)
            return int(address), keep
        cu = self._driver()
        try:
            pool = self._pools[device]
        except KeyError:
            pool = self._pool(cu, device)
        if pool is None:
            p = _check(cu.cuMemAllocAsync(n, stream), "cuMemAllocAsync")
        else:
            p = _check(cu.cuMemAllocFromPoolAsync(n, pool, stream), "cuMemAllocFromPoolAsync")
        return int(p), p

    def free(self, token, stream):
        if self._allocator is None:
            self._driver().cuMemFreeAsync(token, stream)
        # The caller's memory: the token (its keep) is dropped.

    def _pool(self, cu, device):
        with self._lock:
            if device in self._pools:
                return self._pools[device]
            props = cu.CUmemPoolProps()
            props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            props.handleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
            props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            props.location.id = device
            err, pool = cu.cuMemPoolCreate(props)
            if int(err) == self._NOT_SUPPORTED:
                pool = None
            else:
                _check((err, pool), "cuMemPoolCreate")
                # Kept reserved across synchronizes: scratch is asked for at every launch.
                try:
                    keep = cu.cuuint64_t(0xFFFF_FFFF_FFFF_FFFF)
                    attr = cu.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
                    _check(cu.cuMemPoolSetAttribute(pool, attr, keep), "cuMemPoolSetAttribute(RELEASE_THRESHOLD)")
                except BaseException:
                    cu.cuMemPoolDestroy(pool)
                    raise
            self._pools[device] = pool
            return pool

    def close(self, cu):
        """Destroys the pools (their memory is returned once the kernels
        still queued are done); the names of any the driver refused."""
        with self._lock:
            pools, self._pools = self._pools, {}
        failed = []
        for device, pool in pools.items():
            if pool is not None:
                err, = cu.cuMemPoolDestroy(pool)
                if int(err) != 0:
                    failed.append(f"cuMemPoolDestroy (device {device}): {err!r}")
        return failed


def _check_devices(cu, plan, bufs, device):
    """Refuses (INVALID_ARGUMENT) buffers (inputs, then outputs) that the
    driver does not place on CUDA device `device`: host memory (a CPU
    tensor) or another GPU's, which a kernel would fault on, losing the
    CUDA context for the process. Empty buffers are not read."""
    attr = cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    for i, b in enumerate(bufs):
        if 0 in b.shape:
            continue
        err, ordinal = cu.cuPointerGetAttribute(attr, b.ptr)
        if int(err) == 0 and int(ordinal) == device:
            continue
        n = len(plan.inputs)
        what = (f"input {i} ('{plan.inputs[i].name}')" if i < n
                else f"output {i - n} ('{plan.outputs[i - n].name}')")
        if int(err) != 0:
            raise _invalid(f"{what} at {b.ptr:#x} is not CUDA device memory ({err!r}): pass CUDA "
                           f"tensors on device {device}")
        raise _invalid(f"{what} is on CUDA device {int(ordinal)}; the launch is on device {device}")


def _compares_by_value(handle):
    """Whether a driver handle is == (and not !=) another made from its
    value, and != one made from another value: cuda.bindings' handles are,
    ints are."""
    try:
        kind, value = type(handle), int(handle)
        return (handle == kind(value) and not handle != kind(value)
                and handle != kind(value + 1) and not handle == kind(value + 1))
    except Exception:  # noqa: BLE001 (a handle that cannot be rebuilt: compare ints)
        return False


class Launcher:
    """Launches plans; thread safe. pinned_key (64 hex digits): plans that
    do not verify are refused before any module is loaded. driver: the
    cuda.bindings.driver module (the default) or a double with its calls.
    `binds` counts the BoundLaunches made. Modules stay loaded, one per
    distinct cubin and context, until close() (or the `with` block's end).

    Plans with intermediates or workspaces take scratch memory at each
    launch. scratch=None: from a stream-ordered pool this Launcher keeps on
    each device, holding what it reserved until close(). Or a callable
    (nbytes, device ordinal, CUstream) -> (address, keep) giving the
    caller's memory, e.g. a framework's caching allocator: `keep` is dropped
    once the launch's kernels are enqueued, so the allocator must be
    stream-ordered (memory reused only behind the stream's earlier work),
    as PyTorch's is for its current stream."""

    def __init__(self, pinned_key=None, driver=None, scratch=None):
        self._pinned = pinned_key
        self._cu = driver
        self._memory = _Scratch(self._driver, scratch)
        self._lock = threading.Lock()
        self._modules = {}   # context handle -> {sha256 of cubin: {"module", "functions"}}
        self._primary = {}   # device ordinal -> its primary context
        self._smem = {}
        self._verified = set()
        self._recent = {}    # (id(plan), inputs, layout) -> (plan, BoundLaunch), for launch()
        self._contexts = {}  # int(context) -> its handle, for close()
        self._bound = weakref.WeakSet()  # The BoundLaunches made, stopped by close()
        self._closed = False
        self.binds = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Unloads every module this Launcher loaded, each in its context,
        and releases the primary contexts it retained. The BoundLaunches it
        made stop running (run() returns FAILED_PRECONDITION), and later
        launch() and bind() raise FAILED_PRECONDITION. Idempotent.
        Synchronizes each of those contexts first (cuCtxSynchronize: all of
        its streams, torch's too), so no kernel already queued loses its
        module. Call it when no other thread is launching through this
        Launcher, and before destroying a context it launched in (one it
        did not retain: the current context of launch() or bind() without a
        device). Raises LaunchError (INTERNAL) naming any unload the driver
        refused, after trying every one."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            bound, modules, primary = list(self._bound), self._modules, self._primary
            contexts = self._contexts
            self._bound, self._modules, self._primary, self._contexts = weakref.WeakSet(), {}, {}, {}
            self._recent.clear()
            self._smem.clear()
        for b in bound:
            b._hot = None
        if not modules and not primary:
            return
        cu, failed = self._driver(), []
        for ctx, loaded in modules.items():
            err, = cu.cuCtxPushCurrent(contexts.get(ctx, ctx))
            if int(err) != 0:
                failed.append(f"cuCtxPushCurrent({ctx:#x}): {err!r}")
                continue
            try:
                cu.cuCtxSynchronize()
                for mod in loaded.values():
                    err, = cu.cuModuleUnload(mod["module"])
                    if int(err) != 0:
                        failed.append(f"cuModuleUnload: {err!r}")
            finally:
                cu.cuCtxPopCurrent()
        failed += self._memory.close(cu)
        for device in primary:
            err, dev = cu.cuDeviceGet(device)
            if int(err) == 0:
                err, = cu.cuDevicePrimaryCtxRelease(dev)
            if int(err) != 0:
                failed.append(f"releasing device {device}'s primary context: {err!r}")
        if failed:
            raise LaunchError("INTERNAL", "close: " + "; ".join(failed))

    @property
    def cached_modules(self):
        with self._lock:
            return sum(len(m) for m in self._modules.values())

    def _driver(self):
        if self._cu is None:
            self._cu = _driver()
        return self._cu

    def _function(self, cu, ctx, kernel):
        """The kernel's CUfunction in context `ctx` (current): a lookup,
        locked only to load a module or get a function the first time."""
        digest = hashlib.sha256(kernel.cubin).digest()
        mod = self._modules.get(ctx, {}).get(digest)
        f = mod["functions"].get(kernel.entry) if mod is not None else None
        if f is not None:
            return f
        with self._lock:
            if self._closed:
                raise LaunchError("FAILED_PRECONDITION", "this Launcher is closed")
            per_ctx = self._modules.setdefault(ctx, {})
            mod = per_ctx.get(digest)
            if mod is None:
                mod = self._load(cu, kernel)
                per_ctx[digest] = mod
            f = mod["functions"].get(kernel.entry)
            if f is None:
                f = _check(cu.cuModuleGetFunction(mod["module"], kernel.entry.encode()),
                           f"cuModuleGetFunction({kernel.entry})")
                mod["functions"][kernel.entry] = f
            return f

    @staticmethod
    def _load(cu, kernel):
        err, module = cu.cuModuleLoadData(kernel.cubin)
        if int(err) != 0 and kernel.ptx:  # A newer GPU than the cubin's target: JIT the PTX.
            err, module = cu.cuModuleLoadData(kernel.ptx.encode() + b"\0")
        if int(err) != 0:
            raise LaunchError("INTERNAL", f"cuModuleLoadData({kernel.entry}, {kernel.arch}) failed: {err!r}")
        return {"module": module, "functions": {}}

    def _verify(self, plan):
        """Verifies `plan` against the pinned key, once per content: plans
        are remembered by the sha256 of their signing payload with the
        signature, so a plan that copies a verified one's key and signature
        onto another cubin, grid or params is verified (and refused)."""
        if not self._pinned:
            return
        from kfuse.signing import signing_payload, verify_plan

        seen = (hashlib.sha256(signing_payload(plan)).digest(), bytes(plan.signature))
        if seen not in self._verified:
            verify_plan(plan, self._pinned)
            with self._lock:
                self._verified.add(seen)

    def bind(self, plan, inputs, outputs, device=None):
        """A BoundLaunch of `plan` for tensors laid out as these: the
        contract checked, the tensors' memory checked to be on the
        context's device, modules loaded, in the primary context of device
        ordinal `device`, or (None) the current context. Later run()
        addresses are not checked for their device. Raises LaunchError as
        launch does."""
        self._verify(plan)
        bufs = [as_buffer(t) for t in inputs] + [as_buffer(t, output=True) for t in outputs]
        return self._bind(Layout(plan, bufs[:len(inputs)], bufs[len(inputs):]), device, bufs)

    def launch(self, plan, inputs, outputs, stream=0):
        """Checks the contract and the tensors' device and enqueues the
        plan's kernels on `stream` (a CUstream, its int handle, or torch's
        stream.cuda_stream) in the current context. The BoundLaunches of the
        last few plans launched are kept (by plan object, layout and
        context), verified once: a plan must not be changed once launched."""
        bufs = [as_buffer(t) for t in inputs] + [as_buffer(t, output=True) for t in outputs]
        ptrs = [b.ptr for b in bufs]
        key = (id(plan), len(inputs), tuple((b.shape, b.strides, b.dtype) for b in bufs))
        hit = self._recent.get(key)
        bound = hit[1] if hit is not None and hit[0] is plan else None
        if bound is not None and int(_check(self._cu.cuCtxGetCurrent(), "cuCtxGetCurrent")) != bound.context:
            bound = None
        if bound is None:
            self._verify(plan)
            layout = Layout(plan, bufs[:len(inputs)], bufs[len(inputs):])
            refusal = layout.refusal(ptrs)
            if refusal is not None:
                raise refusal
            bound = self._bind(layout, None, bufs)
            if len(self._recent) >= 64:
                self._recent.clear()
            self._recent[key] = (plan, bound)
        else:
            _check_devices(self._cu, plan, bufs, bound.device)
        refusal = bound.run(ptrs, stream)
        if refusal is not None:
            raise refusal

    def _context(self, cu, device):
        if device is None:
            ctx = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
            if int(ctx) == 0:
                raise LaunchError("FAILED_PRECONDITION", "no CUDA context is current (initialise "
                                  "CUDA first, e.g. torch.cuda.init())")
            return ctx
        ctx = self._primary.get(device)
        if ctx is None:
            with self._lock:
                if self._closed:  # Else close() could miss the context retained here.
                    raise LaunchError("FAILED_PRECONDITION", "this Launcher is closed")
                ctx = self._primary.get(device)
                if ctx is None:
                    dev = _check(cu.cuDeviceGet(device), f"cuDeviceGet({device})")
                    ctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
                    self._primary[device] = ctx
        return ctx

    def _bind(self, layout, device, bufs):
        if self._closed:
            raise LaunchError("FAILED_PRECONDITION", "this Launcher is closed")
        cu = self._driver()
        ctx = self._context(cu, device)
        with self._lock:
            self._contexts.setdefault(int(ctx), ctx)
        push = int(_check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")) != int(ctx)
        if push:
            _check(cu.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        try:
            ordinal = int(_check(cu.cuCtxGetDevice(), "cuCtxGetDevice"))
            _check_devices(cu, layout.plan, bufs, ordinal)
            kernels, scratch, n_slots, keep = self._bind_kernels(cu, int(ctx), layout)
        finally:
            if push:
                cu.cuCtxPopCurrent()
        bound = BoundLaunch(cu, ctx, ordinal, layout, kernels, scratch, n_slots, keep, self._memory)
        with self._lock:
            if self._closed:  # Closed while binding: its modules may be gone.
                raise LaunchError("FAILED_PRECONDITION", "this Launcher is closed")
            self._bound.add(bound)
            self.binds += 1
        return bound

    def _bind_kernels(self, cu, ctx, layout):
        """Per kernel (entry, f, grid, block, smem, [slot number or ctypes
        scalar per parameter], memsets); scratch slots; the number of slots;
        the scalars."""
        plan, cfg = layout.plan, layout.config
        n_inputs = len(plan.inputs)
        first = layout.buffers  # Intermediates, then workspaces, after the buffers.
        scratch = [(first + i, n) for i, n in enumerate(cfg.intermediate_bytes)]
        kernels, keep = [], []
        for kl in cfg.kernels:
            kernel = plan.kernels[kl.kernel]
            f = self._function(cu, ctx, kernel)
            if kl.empty:
                continue
            if kl.cluster != (0, 0, 0):
                raise LaunchError("UNIMPLEMENTED", "cluster launches are not implemented in "
                                  "the Python launcher yet")
            self._raise_smem(cu, f, kl.dynamic_smem_bytes)
            params, memsets = [], []
            for kind, v in kl.params:
                if kind == "buffer":
                    where, i = v
                    params.append(i if where == "input" else n_inputs + i if where == "output"
                                  else first + i)
                elif kind in ("i32", "i64"):
                    params.append((ctypes.c_int32 if kind == "i32" else ctypes.c_int64)(v))
                    keep.append(params[-1])
                elif kind == "workspace":
                    slot = first + len(scratch)
                    scratch.append((slot, v[0]))
                    if v[1] and v[0]:
                        memsets.append((slot, v[0]))
                    params.append(slot)
                else:
                    raise LaunchError("UNIMPLEMENTED", "tensor-map parameters are not "
                                      "implemented in the Python launcher yet")
            kernels.append((kernel.entry, f, *kl.grid, *kl.block, kl.dynamic_smem_bytes, params,
                            tuple(memsets)))
        return tuple(kernels), tuple(scratch), first + len(scratch), keep

    def _raise_smem(self, cu, f, n):
        # Static and dynamic shared memory together may pass 48 KiB only under
        # a raised dynamic limit: any kernel with dynamic memory gets it set.
        if n == 0:
            return
        with self._lock:
            if self._smem.get(int(f), 0) >= n:
                return
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(cu.cuFuncSetAttribute(f, attr, n), "cuFuncSetAttribute")
            self._smem[int(f)] = n


__all__ = ["Buffer", "as_buffer", "eval_expr", "bind_symbols", "resolve", "LaunchConfig",
           "KernelLaunch", "Layout", "BoundLaunch", "Launcher"]
