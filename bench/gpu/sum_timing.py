"""Times a few sums through kfuse.torch (mode="quick": tuned) against eager
PyTorch, side by side in one process: a 1-D total (the whole tensor one row
of a row kernel), a 2-D total (split into rows, then the rows' sums) and
bool mask lengths (an int64 sum, as torch's). Prints, per case, the median
of 50 launches after an L2 flush, and the bytes read over that time.

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/sum_timing.py
"""
import statistics

import torch

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
    print(f"{'case':42} {'kfuse us':>9} {'eager us':>9} {'kfuse GB/s':>10} {'eager GB/s':>10} speedup  exact")
    with kfuse.Launcher() as launcher, torch.inference_mode():
        for name, fn, x in cases:
            fused = kt.fuse(fn, fallback="raise", mode="quick", launcher=launcher)
            got, want = fused(x), fn(x)
            torch.cuda.synchronize()
            if x.dtype.is_floating_point:
                ref = fn(x.double())
                ok = f"err {abs(got.double() - ref).item():.3g} (eager {abs(want.double() - ref).item():.3g})"
            else:
                ok = str(bool(torch.equal(got, want)) and got.dtype == want.dtype)
            tk, te = median_us(fused, x), median_us(fn, x)
            gb = x.numel() * x.element_size() / 1e3
            print(f"{name:42} {tk:9.1f} {te:9.1f} {gb / tk:10.0f} {gb / te:10.0f} {te / tk:6.2f}x  {ok}")


if __name__ == "__main__":
    main()
