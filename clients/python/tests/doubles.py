"""Test doubles shared by the kfuse.torch, kfuse.backend and launcher tests
(none of them needs torch)."""
import ctypes
import threading
import time

from kfuse import pb


def kinds(chain):
    """The op kinds of a kfuse.Chain, by name."""
    return [pb.OpKind.Name(op.kind) for op in chain.to_proto().ops]


# kfused's nominal sm_90 ceilings (core/roofline.cc: an H200's measured
# figures), as GetDeviceInfo answers them without a GPU.
NOMINAL_SM90 = pb.Ceilings(read_bytes_per_second=4.25e12, write_bytes_per_second=4.25e12,
                           copy_bytes_per_second=4.25e12, fma_flops=61e12, special_flops=4.14e12,
                           tensor_flops=644e12)


class CountingClient:
    """A client double: forwards to `real` (or raises `error`), counting
    compiles and keeping the last one's keyword arguments; it has real's address and pinned key, as the shared plan
    cache keys by them. device_info: real's, else `ceilings` (default the
    nominal sm_90 ones; an exception is raised)."""

    def __init__(self, real=None, error=None, ceilings=NOMINAL_SM90):
        self.real, self.error, self.calls, self.last_kw = real, error, 0, None
        self.ceilings, self.info_calls = ceilings, 0
        self.address = getattr(real, "address", "fake")
        self.verify_key = getattr(real, "verify_key", None)

    def device_info(self, **kw):
        self.info_calls += 1
        if self.real is not None:
            return self.real.device_info(**kw)
        if isinstance(self.ceilings, Exception):
            raise self.ceilings
        return pb.DeviceInfo(ceilings=self.ceilings)

    def compile(self, chain, **kw):
        self.calls += 1
        self.last_kw = kw
        if self.error is not None:
            raise self.error
        return self.real.compile(chain, **kw)


class Handle(int):
    """A driver handle (CUcontext, CUmodule, CUfunction, CUstream)."""


class FakeDriver:
    """The cuda.bindings.driver calls the launcher makes, answering success.
    Contexts: `current` (0: none) with a push/pop stack; device d's primary
    context is 1 + d, and every address is memory of the current context's
    device. cuLaunchKernel counts `calls`; with `record`, each
    launch's arguments, current context and thread go to `launches`, its kernel
    parameters decoded at once when `param_types` (ctypes types) is set,
    after yielding the GIL if `pause` (as the real driver call lets other
    threads run)."""

    CUstream = Handle
    CUfunction = Handle

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    class CUpointer_attribute:
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9

    class CUmemAllocationType:
        CU_MEM_ALLOCATION_TYPE_PINNED = 1

    class CUmemAllocationHandleType:
        CU_MEM_HANDLE_TYPE_NONE = 0

    class CUmemLocationType:
        CU_MEM_LOCATION_TYPE_DEVICE = 1

    class CUmemPool_attribute:
        CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4

    class cuuint64_t(int):
        pass

    class CUmemPoolProps:
        def __init__(self):
            self.allocType = self.handleTypes = 0
            self.location = type("CUmemLocation", (), {"type": 0, "id": 0})()

    def __init__(self, record=False, current=1, param_types=None, pause=False):
        self.record, self.current, self.stack = record, current, []
        self.param_types, self.pause = param_types, pause
        self.launches, self.loads, self.calls, self.allocs = [], [], 0, 0
        self.unloads, self.released = [], []  # (module, current context); device
        self.synced = []  # The current context of each cuCtxSynchronize.
        # Scratch pools: each made's (props, attributes set); the pool of each
        # allocation (None: the device's default); the pools destroyed.
        self.pools, self.pool_of, self.destroyed = [], [], []

    def cuCtxGetCurrent(self):
        return 0, Handle(self.current)

    def cuCtxPushCurrent(self, ctx):
        self.stack.append(self.current)
        self.current = int(ctx)
        return (0,)

    def cuCtxPopCurrent(self):
        popped, self.current = self.current, self.stack.pop()
        return 0, Handle(popped)

    def cuCtxGetDevice(self):
        return 0, Handle(self.current - 1)

    def cuPointerGetAttribute(self, attribute, ptr):
        return 0, self.current - 1

    def cuDeviceGet(self, ordinal):
        return 0, Handle(ordinal)

    def cuDevicePrimaryCtxRetain(self, dev):
        return 0, Handle(1 + int(dev))

    def cuModuleLoadData(self, image):
        self.loads.append(self.current)
        return 0, Handle(0x100 * self.current + len(self.loads))

    def cuCtxSynchronize(self):
        self.synced.append(self.current)
        return (0,)

    def cuModuleUnload(self, module):
        self.unloads.append((int(module), self.current))
        return (0,)

    def cuDevicePrimaryCtxRelease(self, dev):
        self.released.append(int(dev))
        return (0,)

    def cuModuleGetFunction(self, module, name):
        return 0, Handle(0x10000 + int(module))

    def cuFuncSetAttribute(self, f, attr, value):
        return (0,)

    def cuMemPoolCreate(self, props):
        self.pools.append((props, {}))
        return 0, Handle(0x500 + len(self.pools))

    def cuMemPoolSetAttribute(self, pool, attr, value):
        self.pools[int(pool) - 0x501][1][attr] = int(value)
        return (0,)

    def cuMemPoolDestroy(self, pool):
        self.destroyed.append(int(pool))
        return (0,)

    def cuMemAllocFromPoolAsync(self, n, pool, stream):
        self.pool_of.append(int(pool))
        self.allocs += 1
        return 0, Handle(0x7000000 + (self.allocs << 20))

    def cuMemAllocAsync(self, n, stream):
        self.pool_of.append(None)
        self.allocs += 1
        return 0, Handle(0x7000000 + (self.allocs << 20))

    def cuMemFreeAsync(self, p, stream):
        return (0,)

    def cuMemsetD8Async(self, p, value, n, stream):
        return (0,)

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls += 1
        if self.record:
            if self.pause:
                time.sleep(0)
            values = read_params(params, self.param_types) if self.param_types else None
            self.launches.append({"f": int(f), "grid": (gx, gy, gz), "block": (bx, by, bz),
                                  "smem": smem, "stream": int(stream), "params": values,
                                  "context": self.current, "thread": threading.get_ident()})
        return (0,)


def read_params(params, types):
    """The kernel parameter values a launch passed: `params` the address of
    its void* array, as cuLaunchKernel got it; `types` the ctypes type of
    each parameter."""
    slots = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
    return [ctypes.cast(slots[i], ctypes.POINTER(t))[0] for i, t in enumerate(types)]
