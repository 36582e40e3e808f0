"""Times model ops kfuse.torch fuses (mode="quick": tuned) beside eager
PyTorch, torch.compile and a copy of the first input, in one process:

  - rotary embeddings, bf16: the half-split form (rotate_half: a concat of
    the halves) and the interleaved one (rotate_every_two: a stack of the
    odd and even columns, flattened), which kfused iterates over [...,
    D/2, 2], one element a thread;
  - GroupNorm + SiLU (a diffusion UNet's), f32 and bf16: a row kernel
    reading x in place as the groups' rows for the statistics, then one
    pass;
  - batch norm in evaluation + residual + ReLU (a ResNet block's tail),
    bf16: one pass.

Per case, the median of 50 calls after an L2 flush, the bandwidth over the
bytes of the inputs read once and the output written once, and the largest
error from float64 of kfuse's and eager's outputs.

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/ops_timing.py
"""
import torch

import kfuse.torch as kt
from sum_timing import median_us  # This folder's: the median of 50 calls after an L2 flush.

F = torch.nn.functional


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def rope_half(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def rope_interleaved(x, cos, sin):
    return x * cos + rotate_every_two(x) * sin


def group_norm_silu(x, w, b):
    return F.silu(F.group_norm(x, 32, w, b))


def batch_norm_residual_relu(x, r, mean, var, w, b):
    return F.relu(F.batch_norm(x, mean, var, w, b) + r)


def rope_inputs(t, h, d):
    angle = torch.rand(t, 1, d, device="cuda") * 6.283
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    return [torch.randn(t, h, d, **bf16), angle.cos().to(torch.bfloat16), angle.sin().to(torch.bfloat16)]


def group_norm_inputs(dtype, n, c, hw):
    kw = dict(dtype=dtype, device="cuda")
    return [torch.randn(n, c, hw, hw, **kw) * 2 + 0.5, 1 + 0.1 * torch.randn(c, **kw), torch.randn(c, **kw)]


def batch_norm_inputs(n, c, hw):
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    return [torch.randn(n, c, hw, hw, **bf16), torch.randn(n, c, hw, hw, **bf16), torch.randn(c, device="cuda"),
            torch.rand(c, device="cuda") + 0.5, torch.randn(c, device="cuda"), torch.randn(c, device="cuda")]


CASES = [  # (function, its inputs, a label of the shape)
    (rope_half, lambda: rope_inputs(4096, 32, 128), "[4096, 32, 128]"),
    (rope_interleaved, lambda: rope_inputs(4096, 32, 128), "[4096, 32, 128]"),
    (rope_half, lambda: rope_inputs(16384, 8, 64), "[16384, 8, 64]"),
    (rope_interleaved, lambda: rope_inputs(16384, 8, 64), "[16384, 8, 64]"),
    (group_norm_silu, lambda: group_norm_inputs(torch.bfloat16, 2, 320, 64), "bf16 [2, 320, 64, 64]"),
    (group_norm_silu, lambda: group_norm_inputs(torch.float32, 2, 320, 64), "f32 [2, 320, 64, 64]"),
    (group_norm_silu, lambda: group_norm_inputs(torch.bfloat16, 8, 512, 32), "bf16 [8, 512, 32, 32]"),
    (batch_norm_residual_relu, lambda: batch_norm_inputs(32, 64, 56), "bf16 [32, 64, 56, 56]"),
]


def main():
    torch.manual_seed(0)
    print(f"{'case':26}{'shape':24}{'kfuse us':>10}{'GB/s':>7}{'eager us':>10}{'compile us':>11}"
          f"{'copy us':>9}{'vs eager':>10}{'vs compile':>12}  err (eager)  kernels")
    with torch.inference_mode():
        for fn, make, label in CASES:
            xs = make()
            nbytes = sum(x.numel() * x.element_size() for x in xs) + xs[0].numel() * xs[0].element_size()
            copy = median_us(torch.clone, xs[0])
            fused = kt.fuse(fn, fallback="raise", mode="quick")
            compiled = torch.compile(fn)
            got, want = fused(*xs), fn(*xs)
            compiled(*xs)
            ref = fn(*[x.double() for x in xs])
            err = (got.double() - ref).abs().max().item()
            err_eager = (want.double() - ref).abs().max().item()
            us = [median_us(f, *xs) for f in (fused, fn, compiled)]
            kernels = [k.variant.family for k in fused.last_plan.kernels]
            print(f"{fn.__name__:26}{label:24}{us[0]:10.1f}{nbytes / us[0] / 1e3:7.0f}{us[1]:10.1f}"
                  f"{us[2]:11.1f}{copy:9.1f}{us[1] / us[0]:9.2f}x{us[2] / us[0]:11.2f}x"
                  f"  {err:.3g} ({err_eager:.3g})  {len(kernels)}")


if __name__ == "__main__":
    main()
