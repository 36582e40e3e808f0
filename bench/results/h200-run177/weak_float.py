"""On the H200, through a real kfused: kfuse.torch fuses f(x) = sqrt(x * 65536.0)
and g(x) = (x * 2.0) / 3 on int32 tensors of fresh random values (the
whole-float constants sent as weak_float), and compares each with eager
torch. Before weak_float the server multiplied in int32 (wrapping)."""
import sys
import warnings

import torch
import kfuse
import kfuse.torch as kt

client = kfuse.Client(sys.argv[1], timeout=120, on_unavailable="raise")
torch.manual_seed(1234)
x = torch.randint(-(1 << 30), 1 << 30, (1 << 20,), dtype=torch.int32, device="cuda")
xp = x.abs()
cases = [("sqrt(x * 65536.0)", lambda t: torch.sqrt(t * 65536.0), xp),
         ("(x * 2.0) / 3", lambda t: (t * 2.0) / 3, x),
         ("x * 2 (int stays int)", lambda t: t * 2, x)]
for name, f, arg in cases:
    ff = kt.fuse(f, client=client, mode="heuristic", fallback="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error", kfuse.FallbackWarning)
        with torch.inference_mode():
            y = ff(arg)
            ref = f(arg)
    torch.cuda.synchronize()
    fused = ff.cache.misses >= 1
    same_dtype = y.dtype == ref.dtype
    if y.dtype.is_floating_point:
        bad = int((~torch.isclose(y, ref, rtol=1e-6, atol=0)).sum())
    else:
        bad = int((y != ref).sum())
    print(f"{name}: fused={fused} dtype kfuse {y.dtype} torch {ref.dtype}; {bad} of {arg.numel()} differ")
    assert fused and same_dtype and bad == 0, name
print("weak float on the GPU: ok")
