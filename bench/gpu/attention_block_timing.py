"""Times a causal self-attention block between projections through
kfuse.torch (mode="quick": tuned) beside eager PyTorch and torch.compile,
in one process: the fused QKV projection split into heads, SDPA, the heads
joined for the output projection, bf16. kfused plans it as the QKV
product, three pointwise copies of its parts, the attention kernel, two
pointwise copies of its output (transposed back, then rows) and the output
product.

Per size, the median of 50 calls after an L2 flush, each kernel's share of
kfuse's time (the profiler's GPU times, summed by kernel), and the largest
error from float64 of kfuse's and eager's outputs.

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/attention_block_timing.py
"""
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import kfuse.torch as kt
from sum_timing import median_us  # This folder's: the median of 50 calls after an L2 flush.

F = torch.nn.functional
HEAD = 128
SIZES = ((4096, 4096), (1024, 2048))  # Tokens, hidden (heads of HEAD).


def block(x, wqkv, wo):
    t, hd = x.shape[0], x.shape[1]
    q, k, v = (x @ wqkv).split(hd, dim=-1)
    q = q.view(t, hd // HEAD, HEAD).transpose(0, 1)
    k = k.view(t, hd // HEAD, HEAD).transpose(0, 1)
    v = v.view(t, hd // HEAD, HEAD).transpose(0, 1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(0, 1).reshape(t, hd) @ wo


def kernel_shares(fn, *args, calls=10):
    """{kernel name: median GPU us a call} over `calls` calls."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(*args)
        torch.cuda.synchronize()
    per = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name[:40]] += e.device_time / calls
    return dict(per)


def main():
    torch.manual_seed(0)
    compiled = torch.compile(block)
    print(f"{'tokens x hidden':18}{'kfuse us':>10}{'eager us':>10}{'compile us':>12}"
          f"{'vs eager':>10}{'vs compile':>12}  err (eager)")
    shares = []
    with torch.inference_mode():
        for t, hd in SIZES:
            bf16 = dict(dtype=torch.bfloat16, device="cuda")
            xs = [torch.randn(t, hd, **bf16), torch.randn(hd, 3 * hd, **bf16) / hd ** 0.5,
                  torch.randn(hd, hd, **bf16) / hd ** 0.5]
            fused = kt.fuse(block, fallback="raise", mode="quick")
            got, want = fused(*xs), block(*xs)
            ref = block(*[x.double() for x in xs])
            compiled(*xs)
            torch.cuda.synchronize()
            err = (got.double() - ref).abs().max().item()
            err_eager = (want.double() - ref).abs().max().item()
            times = [median_us(fused, *xs), median_us(block, *xs), median_us(compiled, *xs)]
            print(f"{t:>6} x {hd:<9}" + "".join(f"{v:10.1f}" for v in times[:2]) + f"{times[2]:12.1f}"
                  f"{times[1] / times[0]:9.2f}x{times[2] / times[0]:11.2f}x  {err:.3g} ({err_eager:.3g})")
            shares.append((t, hd, kernel_shares(fused, *xs)))
    for t, hd, per in shares:
        print(f"kfuse kernels, {t} x {hd}:")
        for name, us in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"  {us:9.1f} us  {name}")


if __name__ == "__main__":
    main()
