"""Times functions of non-contiguous inputs through kfuse.torch (mode="quick":
tuned), side by side in one process: the view sent as it lies (read in place
at its strides), the same function of view.contiguous() (the copy timed in,
what a caller does without strided inputs), and eager PyTorch on the view.

Cases: a softmax over a padded vocabulary's first 50257 columns, an RMSNorm
of the k third of a fused projection's output, a softmax of a transposed
f32 matrix, silu(x) * y with y a row expanded over x's rows, the
differences along the rows of a padded tensor (x[:, 1:] - x[:, :-1]), and
two inputs at addresses off the 16-byte boundary (an RMSNorm of a slice one
element in, silu(x) * y with y dense but 5 elements off): "contiguous()"
there copies them to aligned memory (clone() where already contiguous);
each is followed by its twin on the boundary, for the windows' cost.

Per case, the median of 50 calls after an L2 flush, the bytes moved over
each time (each view element read once, each output written once), a dense
copy of the output's bytes for scale, the largest error from float64 of the
fused and eager results, and each kernel's variant.

    KFUSE_SERVER=127.0.0.1:7431 python3 bench/gpu/strided_timing.py
"""
import torch

import kfuse.torch as kt
from sum_timing import median_us  # This folder's: the median of 50 calls after an L2 flush.

F = torch.nn.functional


def cases():
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    return [
        ("softmax of bf16[4096, 50304][:, :50257]", lambda x: F.softmax(x, dim=-1),
         [torch.randn(4096, 50304, **bf16)[:, :50257]]),
        ("rms_norm of bf16[16384, 3072][:, 1024:2048]", lambda x, w: F.rms_norm(x, (1024,), w, 1e-6),
         [torch.randn(16384, 3072, **bf16)[:, 1024:2048], torch.randn(1024, **bf16)]),
        ("softmax of f32[8192, 4096].t()", lambda x: F.softmax(x, dim=-1),
         [torch.randn(8192, 4096, device="cuda").t()]),
        ("silu(x) * y.expand, bf16[16384, 4096]", lambda x, y: F.silu(x) * y,
         [torch.randn(16384, 4096, **bf16), torch.randn(1, 4096, **bf16).expand(16384, 4096)]),
        ("x[:, 1:] - x[:, :-1], bf16[16384, 4104][:, :4097]", lambda x: x[:, 1:] - x[:, :-1],
         [torch.randn(16384, 4104, **bf16)[:, :4097]]),
        # Addresses off the 16-byte boundary: each sent from the boundary before it.
        ("rms_norm of bf16[16384, 4104][:, 1:4097]", lambda x, w: F.rms_norm(x, (4096,), w, 1e-6),
         [torch.randn(16384, 4104, **bf16)[:, 1:4097], torch.randn(4096, **bf16)]),
        ("rms_norm of bf16[16384, 4104][:, 8:4104] (twin)", lambda x, w: F.rms_norm(x, (4096,), w, 1e-6),
         [torch.randn(16384, 4104, **bf16)[:, 8:4104], torch.randn(4096, **bf16)]),
        ("silu(x) * y, bf16[16384, 4096], y 5 elements off", lambda x, y: F.silu(x) * y,
         [torch.randn(16384, 4096, **bf16), _off_boundary((16384, 4096), 5, **bf16)]),
        ("silu(x) * y, bf16[16384, 4096] (twin)", lambda x, y: F.silu(x) * y,
         [torch.randn(16384, 4096, **bf16), torch.randn(16384, 4096, **bf16)]),
    ]


def _off_boundary(shape, elements, dtype, device):
    """A dense tensor whose address lies `elements` past a 16-byte boundary."""
    n = shape[0] * shape[1]
    base = torch.randn(n + 16, dtype=dtype, device=device)
    skip = (-base.data_ptr() // base.element_size()) % (16 // base.element_size()) + elements
    return base[skip:skip + n].view(shape)


def main():
    torch.manual_seed(0)
    head = ("in place", "contiguous()", "eager")
    print(f"{'case':50}" + "".join(f"{h + ' us':>18}" for h in head) +
          "  in place GB/s  copy GB/s  vs eager  vs contiguous()  err (eager)")
    variants = []
    with torch.inference_mode():
        for name, fn, xs in cases():
            # A twin: the case above it with its inputs on the boundary.
            assert "(twin)" in name or any(not x.is_contiguous() or x.data_ptr() % 16 for x in xs)
            fused = kt.fuse(fn, fallback="raise", mode="quick")
            got, want = fused(*xs), fn(*xs)
            ref = fn(*[x.double() for x in xs])
            torch.cuda.synchronize()
            err = (got.double() - ref).abs().max().item()
            err_eager = (want.double() - ref).abs().max().item()
            # Eager copies first, then the plan of dense inputs.
            copy_then_fused = kt.fuse(fn, fallback="raise", mode="quick")

            def contiguous_first(*a, f=copy_then_fused):
                return f(*[x.clone() if x.is_contiguous() and x.data_ptr() % 16 else x.contiguous()
                           for x in a])

            contiguous_first(*xs)
            times = [median_us(fused, *xs), median_us(contiguous_first, *xs), median_us(fn, *xs)]
            moved = sum(_read_bytes(x) for x in xs) + got.numel() * got.element_size()
            out_copy = torch.empty_like(got)
            t_copy = median_us(out_copy.copy_, got)
            copy_gbs = 2 * got.numel() * got.element_size() / 1e3 / t_copy
            t = times[0]
            print(f"{name:50}" + "".join(f"{v:18.1f}" for v in times) +
                  f"  {moved / 1e3 / t:13.0f}  {copy_gbs:9.0f}  {times[2] / t:7.2f}x  {times[1] / t:14.2f}x"
                  f"  {err:.3g} ({err_eager:.3g})")
            fused(*xs)
            for k in fused.last_plan.kernels:
                params = ", ".join(f"{p}={v}" for p, v in sorted(k.variant.params.items()))
                variants.append(f"  {name}: {k.entry} {{{params}}}")
    print("variants:")
    print("\n".join(variants))


def _read_bytes(x):
    """The bytes of x's distinct elements: a broadcast dim (stride 0) is
    read once."""
    n = 1
    for size, stride in zip(x.shape, x.stride()):
        n *= size if stride != 0 else 1
    return n * x.element_size()


if __name__ == "__main__":
    main()
