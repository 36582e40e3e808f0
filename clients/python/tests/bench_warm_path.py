#!/usr/bin/env python3
"""Host time of a warm kfuse.torch call with the launch stubbed: what the
Python path costs above cuLaunchKernel itself, on any machine (no GPU, no
kfused).

    python clients/python/tests/bench_warm_path.py [--calls 100000] [--profile]
    python clients/python/tests/bench_warm_path.py --cuda    # the same path on a GPU

A fused function is given a hand-made plan (one kernel: every input and
output a buffer parameter, a 64-bit size, an ALIGNED precondition per
buffer, as kfused writes pointwise plans) by a client double, and launches
through kfuse.Launcher on a driver double whose cuLaunchKernel returns at
once. Host tensors take the launch path (gpu_only=False). Printed per case:
ns per warm call of the fused function, of Launcher.launch with the cached
plan, and of the stub cuLaunchKernel alone with pre-bound arguments (what
bench/gpu/torch_block.py calls the bare launch); "above the launch" is the
first minus the last. --profile adds cProfile's top entries of the fused
call. --cuda runs the cases on CUDA tensors through cuda.bindings, the
plans' kernels (which return at once) built by nvcc for the GPU, and the
bare launch on that function: the figures bench/gpu/torch_block.py reports,
without kfused. The doubles here are shared with test_warm_path.py.
"""
import argparse
import ctypes
import os
import shutil
import subprocess
import tempfile
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import kfuse
import kfuse.torch as kt
from kfuse import pb
from doubles import FakeDriver

E = pb.Expr


def make_plan(fn, tensors, align=16, key="stub", cubin=None):
    """A one-kernel plan computing fn(*tensors) as kfused would lay it out:
    params (inputs..., outputs..., i64 numel of output 0), an ALIGNED
    precondition per buffer and a 32-bit range check. `cubin`: the kernel's
    (entry kf_stub<number of buffers>), or a stand-in."""
    outs = fn(*[torch.empty(t.shape, dtype=t.dtype, device="meta") for t in tensors])
    outs = outs if isinstance(outs, tuple) else (outs,)
    plan = pb.KernelPlan(key=key)
    for i, t in enumerate(tensors):
        plan.inputs.add(name=f"in{i}", dtype=kfuse.dtype_of(t.dtype), shape=[pb.Dim(size=d) for d in t.shape],
                        strides=[] if t.is_contiguous() else list(t.stride()))
    for i, t in enumerate(outs):
        plan.outputs.add(name=f"out{i}" if len(outs) > 1 else "out", dtype=kfuse.dtype_of(t.dtype),
                         shape=[pb.Dim(size=d) for d in t.shape])
    n = outs[0].numel()
    entry = f"kf_stub{len(tensors) + len(outs)}" if cubin else "kf_stub"
    k = plan.kernels.add(entry=entry, arch="sm_90", cubin=cubin or b"stub-" + key.encode())
    k.grid.x.CopyFrom(E(binary=E.Binary(op=E.OP_CEIL_DIV, lhs=E(constant=n), rhs=E(constant=1024))))
    k.block.x.CopyFrom(E(constant=256))
    P = pb.Precondition
    refs = ([pb.BufferRef(input=i) for i in range(len(tensors))]
            + [pb.BufferRef(output=i) for i in range(len(outs))])
    for r in refs:
        k.params.add(kind=pb.Param.KIND_BUFFER, buffer=r)
        k.preconditions.add(kind=P.KIND_ALIGNED, buffer=r, value=align,
                            description=f"{r.WhichOneof('kind')} {getattr(r, r.WhichOneof('kind'))} "
                            f"is {align}-byte aligned (vector access)")
    k.params.add(kind=pb.Param.KIND_SCALAR, value=E(constant=n), scalar_dtype=pb.DTYPE_I64)
    k.preconditions.add(kind=P.KIND_AT_MOST, expr=E(constant=n), value=(1 << 31) - 1,
                        description="the element count fits 32 bits")
    return plan


class PlanClient:
    """A client double answering every compile with `plan`, counting calls."""

    def __init__(self, plan):
        self.plan, self.calls, self.address = plan, 0, "stub"

    def compile(self, chain, **kw):
        self.calls += 1
        return pb.CompileResponse(plan=self.plan)


def fused(fn, tensors, driver, align=16, cubin=None):
    """(fused fn warmed on tensors, its plan, the client double)."""
    client = PlanClient(make_plan(fn, tensors, align, key=fn.__name__, cubin=cubin))
    ff = kt.fuse(fn, client=client, launcher=kfuse.Launcher(driver=driver), fallback="raise")
    ff.gpu_only = driver is None
    ff(*tensors)
    return ff, client.plan, client


# ---------------------------------------------------------------------------
# The cases: torch_block.py's warm-call shapes (4 tokens).

def swiglu(h):
    a, b = h.chunk(2, -1)
    return F.silu(a) * b


def add_rms_norm(x, r, w):
    s = x + r
    return s, F.rms_norm(s, (s.shape[-1],), w, 1e-6)


def rotary(x, cos, sin):
    rot = torch.cat([-x[..., 64:], x[..., :64]], -1)
    return x * cos.unsqueeze(1) + rot * sin.unsqueeze(1)


CASES = {
    "swiglu": (swiglu, [(4, 2 * 11008)]),
    "add_rms_norm": (add_rms_norm, [(4, 4096), (4, 4096), (4096,)]),
    "rotary": (rotary, [(4, 32, 128), (4, 128), (4, 128)]),
}


def per_call_ns(fn, calls, rounds, sync=None):
    """Median ns per call of fn() over `rounds` loops of calls // rounds;
    sync() (the GPU drained) before each loop."""
    n = max(1, calls // rounds)
    for _ in range(min(n, 1000)):
        fn()
    samples = []
    for _ in range(rounds):
        if sync is not None:
            sync()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(samples)


def bare_launch(driver, f=None, stream=0, ptrs=(0x10000, 0x20000, 0x30000, 0x40000)):
    """cuLaunchKernel of `f` (default: a stub handle) on pre-bound arguments
    (the buffer addresses `ptrs`, then a 64-bit size), as a bare launch
    makes it."""
    vals = [ctypes.c_uint64(p) for p in ptrs] + [ctypes.c_int64(1)]
    args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
    addr, launch = ctypes.addressof(args), driver.cuLaunchKernel
    f = driver.CUfunction(7) if f is None else f
    stream, ok = driver.CUstream(stream), getattr(getattr(driver, "CUresult", None), "CUDA_SUCCESS", 0)

    def call():
        err, = launch(f, 1, 1, 1, 256, 1, 1, 0, stream, addr, 0)
        if err != ok:
            raise RuntimeError(err)
    call.keep = (vals, args)
    return call


STUB_SOURCE = "".join(
    f'extern "C" __global__ void kf_stub{n}({"".join("void*, " for _ in range(n))}long long) {{}}\n'
    for n in range(1, 9))


def stub_cubin():
    """A cubin for the current GPU holding kf_stub1 .. kf_stub8 (n buffers
    and a 64-bit size; they return at once), built by nvcc."""
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    major, minor = torch.cuda.get_device_capability()
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "stub.cu"), os.path.join(d, "stub.cubin")
        with open(src, "w") as f:
            f.write(STUB_SOURCE)
        subprocess.run([nvcc, "-cubin", f"-arch=sm_{major}{minor}", "-o", out, src], check=True)
        with open(out, "rb") as f:
            return f.read()


def cuda_bare_launch(plan, tensors, outs):
    """A bare cuLaunchKernel of the plan's kernel (cuda.bindings) on the
    current stream, the tensors' addresses bound once."""
    from cuda.bindings import driver as cu

    torch.cuda.synchronize()
    module = cu.cuModuleLoadData(plan.kernels[0].cubin)[1]
    f = cu.cuModuleGetFunction(module, plan.kernels[0].entry.encode())[1]
    call = bare_launch(cu, f, torch.cuda.current_stream().cuda_stream,
                       [t.data_ptr() for t in list(tensors) + list(outs)])
    call.keep += (module, tensors, outs)
    return call


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=100_000, help="warm calls per measurement")
    p.add_argument("--rounds", type=int, default=10, help="the median of this many loops")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    p.add_argument("--profile", action="store_true", help="cProfile the fused call of each case")
    p.add_argument("--cuda", action="store_true", help="on the GPU, through cuda.bindings (needs nvcc)")
    args = p.parse_args(argv)
    if args.cuda:
        if not torch.cuda.is_available():
            raise SystemExit("--cuda: torch sees no GPU")
        driver, device, cubin, sync = None, "cuda", stub_cubin(), torch.cuda.synchronize
        stream = torch.cuda.current_stream().cuda_stream
    else:
        driver, device, cubin, sync, stream = FakeDriver(), "cpu", None, None, 0
    print(f"torch {torch.__version__} on {device}, {args.calls} calls, median of {args.rounds} loops")
    print(f"{'case':<14}{'fused call':>12}{'Launcher.launch':>17}{'bare launch':>13}"
          f"{'above the launch':>18}")
    with torch.inference_mode():
        for name in args.cases.split(","):
            fn, shapes = CASES[name]
            tensors = [torch.randn(s, dtype=torch.bfloat16, device=device) for s in shapes]
            ff, plan, client = fused(fn, tensors, driver, cubin=cubin)
            first = ff(*tensors)
            outs = [torch.empty_like(o) for o in (first if isinstance(first, tuple) else (first,))]
            launcher = ff.launcher
            bare = cuda_bare_launch(plan, tensors, outs) if args.cuda else bare_launch(driver)
            t_bare = per_call_ns(bare, args.calls, args.rounds, sync)
            t_ff = per_call_ns(lambda: ff(*tensors), args.calls, args.rounds, sync)
            t_l = per_call_ns(lambda: launcher.launch(plan, tensors, outs, stream=stream),
                              max(args.calls // 10, 1000), args.rounds, sync)
            if client.calls != 1 or launcher.binds != 2:  # One for ff, one for launch().
                raise SystemExit(f"{name}: the warm path compiled or bound again")
            if kt._tensor_guards is not None and ff._last.guard[0] is None:
                raise SystemExit(f"{name}: warm calls were compared by the loop, not torch's guard")
            print(f"{name:<14}{t_ff:>10.0f} ns{t_l:>14.0f} ns{t_bare:>10.0f} ns{t_ff - t_bare:>15.0f} ns")
            if args.profile:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.enable()
                for _ in range(min(args.calls, 20000)):
                    ff(*tensors)
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(14)
    return 0


if __name__ == "__main__":
    sys.exit(main())
