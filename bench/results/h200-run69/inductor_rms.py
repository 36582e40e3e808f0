# Inductor's kernels for rms_norm f32 [32768, 4096] and bf16 [16384, 8192]:
# generated Triton source, PTX, launch config, and their time beside ours.
import os, glob, shutil, torch, torch.nn.functional as F
from triton.testing import do_bench
out = os.environ.get("OUT", "/tmp")
def rmsnorm(x, w): return F.rms_norm(x, (x.shape[-1],), w, 1e-6)
for dt, R, C in ((torch.float32, 32768, 4096), (torch.bfloat16, 16384, 8192)):
    x = torch.randn(R, C, device="cuda", dtype=dt); w = torch.randn(C, device="cuda", dtype=dt)
    torch._dynamo.reset(); cf = torch.compile(rmsnorm, dynamic=False); cf(x, w); torch.cuda.synchronize()
    ms = do_bench(lambda: cf(x, w), warmup=25, rep=150, return_mode="median")
    ms2 = do_bench(lambda: y.copy_(x), warmup=25, rep=150, return_mode="median") if (y := torch.empty_like(x)) is not None else 0
    print(dt, R, C, "torch.compile %.4f ms, copy_ %.4f ms" % (ms, ms2), flush=True)
