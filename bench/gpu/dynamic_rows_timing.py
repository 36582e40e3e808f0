"""Times kfuse.torch's fuse(dynamic=True), one plan for every row count of a
bucket, against a plan compiled for each count (dynamic=False) and eager
PyTorch, side by side in one process: an RMSNorm with its residual add and
a softmax, bf16 rows of 4096, at token counts across two buckets.

Per case and count, the median of 50 calls after an L2 flush (sum_timing's
median_us), the dynamic plan's speed over the per-count one's (the target:
0.97 or more), and the
Compile RPCs each made (the dynamic function's count stays at one per
bucket).

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/dynamic_rows_timing.py
"""
import torch

import kfuse.torch as kt
from sum_timing import median_us  # This folder's: the median of 50 calls after an L2 flush.

F = torch.nn.functional
COUNTS = (16384, 9000, 8192, 6000, 4097)  # The buckets of 16384 and 8192.


class _Counting:
    """The default client, counting Compile RPCs."""

    def __init__(self, client):
        self.client, self.calls = client, 0
        self.address = getattr(client, "address", "")
        self.verify_key = getattr(client, "verify_key", None)

    def compile(self, chain, **kw):
        self.calls += 1
        return self.client.compile(chain, **kw)


def cases():
    return [
        ("add + rms_norm", lambda x, r, w: F.rms_norm(x + r, (4096,), w, 1e-6),
         lambda n, w: [torch.randn(n, 4096, dtype=torch.bfloat16, device="cuda"),
                       torch.randn(n, 4096, dtype=torch.bfloat16, device="cuda"), w]),
        ("softmax", lambda x: F.softmax(x, dim=-1),
         lambda n, w: [torch.randn(n, 4096, dtype=torch.bfloat16, device="cuda")]),
    ]


def main():
    torch.manual_seed(0)
    client = kt._default_client()  # $KFUSE_SERVER, as the CLI reads it.
    w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    print(f"{'case':18}{'rows':>8}{'dynamic us':>13}{'per count us':>15}{'eager us':>11}"
          f"{'speed vs per count':>20}{'dynamic GB/s':>15}")
    with torch.inference_mode():
        for name, fn, make in cases():
            dynamic_client, static_client = _Counting(client), _Counting(client)
            dynamic = kt.fuse(fn, client=dynamic_client, fallback="raise", mode="quick", dynamic=True)
            for n in COUNTS:
                xs = make(n, w)
                static = kt.fuse(fn, client=static_client, fallback="raise", mode="quick")
                torch.testing.assert_close(dynamic(*xs), fn(*xs), rtol=2e-2, atol=2e-2)
                torch.testing.assert_close(static(*xs), dynamic(*xs), rtol=2e-2, atol=2e-2)
                td, ts, te = median_us(dynamic, *xs), median_us(static, *xs), median_us(fn, *xs)
                moved = sum(x.numel() * x.element_size() for x in xs) + n * 4096 * 2
                print(f"{name:18}{n:8}{td:13.1f}{ts:15.1f}{te:11.1f}{ts / td:20.3f}{moved / 1e3 / td:15.0f}")
            print(f"  Compile RPCs: dynamic {dynamic_client.calls}, per count {static_client.calls}")
            for n in (COUNTS[0], COUNTS[-1]):
                for k in dynamic.plan_for(*make(n, w)).kernels:
                    params = ", ".join(f"{p}={v}" for p, v in sorted(k.variant.params.items()))
                    print(f"  dynamic plan at {n} rows: {k.entry} {{{params}}}")


if __name__ == "__main__":
    main()
