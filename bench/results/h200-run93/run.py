import subprocess, sys, torch
for seed in (0, 1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn((32768, 4096), device="cuda", generator=g)
    ref = torch.softmax(x.double(), -1)
    err = (torch.softmax(x, -1).double() - ref).abs().max().item()
    print(f"seed {seed}: eager max err {err:.3g}", flush=True)
    x.cpu().numpy().tofile("/tmp/x.bin")
    del ref
    print(subprocess.run(["./acc/acc", "/tmp/x.bin"], capture_output=True, text=True).stdout, flush=True)
