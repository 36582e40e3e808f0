"""Times causal self-attention between projections, bf16, in one process:
kfuse.torch.fuse (mode="quick": tuned), torch.compile with kfuse's backend
(products="framework", its default: compute-bound products and attention
ops left to PyTorch; and products="kfuse": every op fused), eager PyTorch
and torch.compile.

Two functions: `block`, the fused QKV projection split into heads, SDPA,
the heads joined for the output projection (kfused plans it whole as
three kernels: the QKV product, the attention kernel reading Q, K and V as
slices of it and storing its output as the rows the output product
reads, and the output product); and
`prenorm`, a pre-norm transformer's attention sublayer: the residual
stream's add, an RMSNorm, the block, the residual add.

Per size, the median of 50 calls after an L2 flush, the largest error from
float64 of kfuse.torch's and eager's outputs, the ops the backend left to
PyTorch, and each kernel's share of kfuse.torch's time (the profiler's GPU
times, summed by kernel).

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/attention_block_timing.py
"""
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import kfuse.backend as kb
import kfuse.torch as kt
from sum_timing import median_us  # This folder's: the median of 50 calls after an L2 flush.

F = torch.nn.functional
HEAD = 128
SIZES = ((4096, 4096), (1024, 2048))  # Tokens, hidden (heads of HEAD).


def block(x, wqkv, wo):
    # Heads as models lay them out, [batch, heads, tokens, head dim]: SDPA
    # on 3-D tensors takes PyTorch's math path (scores in float32 through
    # memory), in eager and in ATen graphs alike.
    t, hd = x.shape[0], x.shape[1]
    q, k, v = (x @ wqkv).split(hd, dim=-1)
    q = q.view(1, t, hd // HEAD, HEAD).transpose(1, 2)
    k = k.view(1, t, hd // HEAD, HEAD).transpose(1, 2)
    v = v.view(1, t, hd // HEAD, HEAD).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).reshape(t, hd) @ wo


def prenorm(x, r, g, wqkv, wo):
    s = x + r
    return s + block(F.rms_norm(s, (s.shape[1],), g, 1e-6), wqkv, wo)


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


def inputs(fn, t, hd):
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    xs = [torch.randn(t, hd, **bf16), torch.randn(hd, 3 * hd, **bf16) / hd ** 0.5,
          torch.randn(hd, hd, **bf16) / hd ** 0.5]
    if fn is prenorm:
        xs[1:1] = [torch.randn(t, hd, **bf16), 1 + 0.1 * torch.randn(hd, **bf16)]
    return xs


def main():
    torch.manual_seed(0)
    print(f"{'function':9}{'tokens x hidden':17}{'fuse us':>9}{'backend us':>11}{'(all) us':>10}"
          f"{'eager us':>10}{'compile us':>11}{'fuse/eager':>11}{'backend/eager':>14}  err (eager)")
    shares, declined = [], []
    with torch.inference_mode():
        for fn in (block, prenorm):
            for t, hd in SIZES:
                xs = inputs(fn, t, hd)
                fused = kt.fuse(fn, fallback="raise", mode="quick")
                framework = kb.Backend(mode="quick", fallback="raise")
                every = kb.Backend(mode="quick", fallback="raise", products="kfuse")
                torch._dynamo.reset()

                def via_framework(*a):  # Each its own code object: dynamo caches by it.
                    return fn(*a)

                def via_all(*a):
                    return fn(*a)

                def via_inductor(*a):
                    return fn(*a)

                runs = [fused, torch.compile(via_framework, backend=framework),
                        torch.compile(via_all, backend=every), fn, torch.compile(via_inductor)]
                outs = [r(*xs) for r in runs]
                torch.cuda.synchronize()
                ref = fn(*[x.double() for x in xs])
                errs = [(o.double() - ref).abs().max().item() for o in outs]
                times = [median_us(r, *xs) for r in runs]
                print(f"{fn.__name__:9}{t:>6} x {hd:<8}" + "".join(f"{v:10.1f}" for v in times[:2])
                      + "".join(f"{v:10.1f}" for v in times[2:4]) + f"{times[4]:11.1f}"
                      + f"{times[3] / times[0]:10.2f}x{times[3] / times[1]:13.2f}x"
                      + f"  {errs[0]:.3g} ({errs[3]:.3g}); backend {errs[1]:.3g}, (all) {errs[2]:.3g}")
                names = {n: why for g in framework.graphs for n, why in g.declined.items()}
                regions = [r.name for g in framework.graphs for r in g.regions]
                declined.append((fn.__name__, t, hd, names, regions))
                shares.append((fn.__name__, t, hd, kernel_shares(fused, *xs)))
    for name, t, hd, names, regions in declined:
        print(f"backend, {name} {t} x {hd}: regions {regions}; left to PyTorch:")
        for n, why in names.items():
            print(f"  {n}: {why}")
    for name, t, hd, per in shares:
        print(f"kfuse.torch kernels, {name} {t} x {hd}:")
        for k, us in sorted(per.items(), key=lambda kv: -kv[1]):
            print(f"  {us:9.1f} us  {k}")


if __name__ == "__main__":
    main()
