#!/usr/bin/env python3
"""One launch of a kfuse attention manifest and one of SDPA flash on the same
fresh random inputs (for ncu), and their max difference.

  python3 .gpu/profile_attn.py MANIFEST B H S D [causal]
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, "bench/gpu")
import suite  # noqa: E402

try:
    from cuda.bindings import driver as cu
except ImportError:
    from cuda import cuda as cu

man, b, h, s, d = sys.argv[1], *map(int, sys.argv[2:6])
causal = len(sys.argv) > 6 and sys.argv[6] == "causal"
torch.cuda.init()
torch.empty(1, device="cuda")
cu.cuInit(0)
g = torch.Generator(device="cuda").manual_seed(7)
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
out = torch.full((b, h, s, d), float("nan"), device="cuda", dtype=torch.bfloat16)
run = suite.KfuseLauncher(torch, cu, man).bind([q, k, v], [out])
run()
torch.cuda.synchronize()
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
print("max |kfuse - flash|:", (out.float() - ref.float()).abs().max().item(), flush=True)
