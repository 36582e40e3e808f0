"""Times rotary embeddings through kfuse.torch (mode="quick": tuned) beside
eager PyTorch, torch.compile and a copy of x, bf16, in one process: the
half-split form (rotate_half: concat of the halves) and the interleaved one
(rotate_every_two: stack of the odd and even columns, flattened), which
kfused iterates over [..., D/2, 2] (its pieces chosen by the innermost
coordinate, one element a thread).

Per case, the median of 50 calls after an L2 flush, the bandwidth over the
bytes of x, cos and sin read once and the output written once, and the
largest error from float64 of kfuse's and eager's outputs.

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/rotary_timing.py
"""
import torch

import kfuse.torch as kt
from sum_timing import median_us  # This folder's: the median of 50 calls after an L2 flush.

SHAPES = ((4096, 32, 128), (16384, 8, 64))  # Tokens, heads, head dim.


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def half(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def interleaved(x, cos, sin):
    return x * cos + rotate_every_two(x) * sin


def main():
    torch.manual_seed(0)
    print(f"{'form':12}{'shape':18}{'kfuse us':>10}{'GB/s':>7}{'eager us':>10}{'compile us':>11}"
          f"{'copy us':>9}{'of copy':>9}{'vs eager':>10}{'vs compile':>12}  err (eager)")
    with torch.inference_mode():
        for t, h, d in SHAPES:
            bf16 = dict(dtype=torch.bfloat16, device="cuda")
            x = torch.randn(t, h, d, **bf16)
            angle = torch.rand(t, 1, d, device="cuda") * 6.283
            cos, sin = angle.cos().to(torch.bfloat16), angle.sin().to(torch.bfloat16)
            nbytes = 2 * x.numel() * 2 + 2 * cos.numel() * 2
            copy = median_us(torch.clone, x)
            for fn in (half, interleaved):
                fused = kt.fuse(fn, fallback="raise", mode="quick")
                compiled = torch.compile(fn)
                got, want = fused(x, cos, sin), fn(x, cos, sin)
                compiled(x, cos, sin)
                ref = fn(x.double(), cos.double(), sin.double())
                err = (got.double() - ref).abs().max().item()
                err_eager = (want.double() - ref).abs().max().item()
                us = [median_us(f, x, cos, sin) for f in (fused, fn, compiled)]
                print(f"{fn.__name__:12}{str((t, h, d)):18}{us[0]:10.1f}{nbytes / us[0] / 1e3:7.0f}"
                      f"{us[1]:10.1f}{us[2]:11.1f}{copy:9.1f}{copy / us[0]:9.2f}{us[1] / us[0]:9.2f}x"
                      f"{us[2] / us[0]:11.2f}x  {err:.3g} ({err_eager:.3g})")
                print(f"  {fn.__name__} kernel: {fused.last_plan.kernels[0].variant}".replace("\n", " "))


if __name__ == "__main__":
    main()
