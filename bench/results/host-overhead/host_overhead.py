"""The attention block through torch.compile on small host tensors (no GPU):
eager, backend="eager", "aot_eager" and the kfuse backend (nothing fused:
float32 products), median of five rounds of 300 calls.

    build/py-venv-3.11/bin/python bench/results/host-overhead/host_overhead.py
"""
import time, torch, torch.nn.functional as F, kfuse, kfuse.backend as kb
def block(x, wqkv, wo):
    t, hd = x.shape
    q, k, v = (x @ wqkv).split(hd, dim=-1)
    q, k, v = (z.view(1, t, hd // 64, 64).transpose(1, 2) for z in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2).reshape(t, hd) @ wo
c = kfuse.Client("127.0.0.1:7499")  # build/service/kfused --no_gpu --address=127.0.0.1:7499
t, hd = 64, 128
xs = [torch.randn(t, hd), torch.randn(hd, 3 * hd), torch.randn(hd, hd)]
b = kb.Backend(client=c, mode="heuristic", products="framework", min_ops=100)
def via(*a): return block(*a)
def via2(*a): return block(*a)
fb = torch.compile(via, backend=b)
fe = torch.compile(via2, backend="eager")
def via3(*a): return block(*a)
fa = torch.compile(via3, backend="aot_eager")
def tm(f, n=300):
    for _ in range(20): f(*xs)
    t0 = time.perf_counter()
    for _ in range(n): f(*xs)
    return (time.perf_counter() - t0) / n * 1e6
with torch.inference_mode():
    res = {}
    for r in range(5):
        for name, f in (("eager", block), ("compile eager backend", fe), ("aot_eager", fa), ("kfuse backend", fb)):
            res.setdefault(name, []).append(tm(f))
    for name, v in res.items():
        print(f"{name:24} {sorted(v)[2]:8.1f} us (median of 5 rounds)")
