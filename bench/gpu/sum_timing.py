"""Times a few sums through kfuse.torch (mode="quick": tuned) against eager
PyTorch, side by side in one process: a 1-D total (one row, sliced over the
grid), a 2-D total (the rows' sums, then their total), bool mask lengths and
int64 row sums (int64 sums, as torch's).

Per case, the median of 50 calls after an L2 flush of:
  - kfuse through kfuse.torch's own launcher (scratch from torch's caching
    allocator);
  - kfuse through a kfuse.Launcher() (scratch from its own pool);
  - kfuse through a Launcher whose scratch comes from the device's default
    pool at every call (cuMemAllocAsync, freed behind the kernels): the
    launchers' way before they kept a pool, for comparison;
  - the plan's kernels alone, as the profiler records them on the GPU;
  - eager PyTorch.
and the bytes read over each time; then each kernel's variant.

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/sum_timing.py
"""
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

import kfuse
import kfuse.torch as kt


def median_us(fn, *args):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(50):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def kernels_us(fn, *args, calls=20):
    """The median over `calls` of the summed GPU time of kfuse's kernels
    (entry points kf_*) in one call, after an L2 flush each."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    per_call = []
    for _ in range(calls):
        flush.zero_()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn(*args)
            torch.cuda.synchronize()
        per_call.append(sum(e.device_time_total for e in prof.key_averages() if e.key.startswith("kf_")))
    return statistics.median(per_call)


class _DefaultPoolScratch:
    """Scratch from the device's default pool at each call, freed behind the
    kernels once the launch drops it."""

    def __init__(self):
        from cuda.bindings import driver
        self.cu = driver

    def __call__(self, nbytes, device, stream):
        err, p = self.cu.cuMemAllocAsync(nbytes, stream)
        assert int(err) == 0, err
        return int(p), _Freed(self.cu, p, stream)


class _Freed:
    def __init__(self, cu, p, stream):
        self.cu, self.p, self.stream = cu, p, stream

    def __del__(self):
        self.cu.cuMemFreeAsync(self.p, self.stream)


def main():
    torch.manual_seed(0)
    cases = [
        ("total of f32[16777216]", lambda x: x.sum(), torch.randn(1 << 24, device="cuda")),
        ("total of f32[4096, 4096]", lambda x: x.sum(), torch.randn(4096, 4096, device="cuda")),
        ("mask lengths bool[4096, 4096] -> int64", lambda m: m.sum(-1),
         torch.rand(4096, 4096, device="cuda") < 0.5),
        ("int64 row sums i64[4096, 4096]", lambda p: p.sum(-1),
         torch.randint(-2**40, 2**40, (4096, 4096), device="cuda", dtype=torch.int64)),
    ]
    head = ("kfuse.torch", "Launcher", "default pool", "kernels", "eager")
    print(f"{'case':40}" + "".join(f"{h + ' us':>16}" for h in head) + "  kfuse.torch GB/s  eager GB/s  speedup  exact")
    variants = []
    with kfuse.Launcher() as pooled, kfuse.Launcher(scratch=_DefaultPoolScratch()) as per_call, \
            torch.inference_mode():
        for name, fn, x in cases:
            fused = kt.fuse(fn, fallback="raise", mode="quick")
            got, want = fused(x), fn(x)
            torch.cuda.synchronize()
            if x.dtype.is_floating_point:
                ref = fn(x.double())
                ok = f"err {abs(got.double() - ref).item():.3g} (eager {abs(want.double() - ref).item():.3g})"
            else:
                ok = str(bool(torch.equal(got, want)) and got.dtype == want.dtype)
            other = [kt.fuse(fn, fallback="raise", mode="quick", launcher=la) for la in (pooled, per_call)]
            for f in other:
                torch.testing.assert_close(f(x), got, rtol=0, atol=0)
            times = [median_us(fused, x)] + [median_us(f, x) for f in other]
            times += [kernels_us(fused, x), median_us(fn, x)]
            gb = x.numel() * x.element_size() / 1e3
            tk, te = times[0], times[-1]
            print(f"{name:40}" + "".join(f"{t:16.1f}" for t in times) +
                  f"  {gb / tk:16.0f}  {gb / te:10.0f}  {te / tk:6.2f}x  {ok}")
            for k in fused.plan_for(x).kernels:
                params = ", ".join(f"{p}={v}" for p, v in sorted(k.variant.params.items()))
                variants.append(f"  {name}: {k.entry} {{{params}}}")
    print("variants:")
    print("\n".join(variants))


if __name__ == "__main__":
    main()
