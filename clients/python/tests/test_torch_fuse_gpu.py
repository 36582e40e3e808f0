"""Every CASES entry of test_torch_fuse.py fused and launched on a CUDA GPU
(marked gpu; skips without one): fresh random inputs of the cases' dtypes,
the batch dim scaled up, the outputs compared with the function in float64;
so are the STRIDED cases, whose inputs are views at strides of their own.
A fused output passes when its largest error is at most twice eager
PyTorch's plus 2 eps of the output dtype (times the largest |reference|),
with NaN and inf where the reference has them. Run with -s for one line
per output: the case, its input shapes, the seed and both errors;
KFUSE_TEST_SEED=N replays a seed, KFUSE_TEST_DRAWS=N draws N inputs a
case (with -k CASE, how often a case misses)."""
import math
import os

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import kfuse  # noqa: E402
import kfuse.torch as kt  # noqa: E402
from doubles import CountingClient  # noqa: E402
from test_torch_fuse import (CASES, COMPOSITES, _NO_SPECIALS, _TORCH, _gpu, _specials,  # noqa: E402
                             _bn_relu_residual, _ln_chw, attention_block, grouped_attention, grouped_sdpa,
                             written_attention)

F = torch.nn.functional

SCALE = 256  # Times the leading dim of the activations.
UNSCALED = {"reshape_unsqueeze_expand"}  # Its x.view(4, 2, 32) fixes x's shape.


def _scaled(specs):
    """specs with dim 0 times SCALE for the inputs shaped as the first input
    of the highest rank (the activations); the others (weights, biases,
    rotary tables) keep their shapes, so contractions and broadcasts stay
    valid."""
    rank = max(len(shape) for _, shape in specs)
    lead = next(shape for _, shape in specs if len(shape) == rank)
    return [(dt, (shape[0] * SCALE, *shape[1:]) if shape == lead else shape) for dt, shape in specs]


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


def _max_err(got, ref, finite):
    err = (got.double() - ref)[finite].abs()
    return err.max().item() if err.numel() else 0.0


def _seeds():
    """KFUSE_TEST_SEED replays one draw (the seed a run printed);
    KFUSE_TEST_DRAWS (default 1) draws that many fresh inputs a case."""
    if os.environ.get("KFUSE_TEST_SEED"):
        return [int(os.environ["KFUSE_TEST_SEED"])]
    draws = int(os.environ.get("KFUSE_TEST_DRAWS", "1"))
    if draws < 1:
        raise ValueError(f"KFUSE_TEST_DRAWS must be at least 1, not {draws}")
    return [int.from_bytes(os.urandom(4), "little") for _ in range(draws)]


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_case_matches_float64(client, name):
    _gpu()
    fn, specs, kinds = CASES[name]
    if "OP_MATMUL" in kinds and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("matrix products need sm_80 or newer")
    if name not in UNSCALED:
        specs = _scaled(specs)
    missed = [m for seed in _seeds() for m in _draw(client, name, fn, specs, seed)]
    assert not missed, missed


def _draw(client, name, fn, specs, seed):
    """The outputs of one draw of fresh inputs that miss the bound, each as
    (name, seed, output, err_fused, err_eager, atol)."""
    torch.manual_seed(seed)
    xs = [torch.randn(shape, dtype=_TORCH[dt], device="cuda") for dt, shape in specs]
    return _compare(client, name, fn, xs, seed)


def _compare(client, name, fn, xs, seed, reference=None):
    """_draw's outputs that miss the bound, for inputs `xs`."""
    # Launches through a launcher of its own, whose binds count says that the
    # plan ran: fallback="raise" alone lets a plan whose outputs differ from
    # torch's run eagerly (with a warning).
    with kfuse.Launcher() as launcher, torch.inference_mode():
        fused = kt.fuse(fn, client=client, fallback="raise", launcher=launcher)
        missed = _check(name, fn, fused, xs, seed, reference)
        assert launcher.binds == 1, "the plan was not launched"
    return missed


def _check(name, fn, fused, xs, seed, reference=None):
    """The outputs of fused(*xs) that miss the bound against fn's in
    float64 (or reference's, for a function whose dtype= pins its own
    arithmetic), as _draw returns them."""
    with torch.inference_mode():
        fused = _outputs(fused(*xs))
        eager = _outputs(fn(*xs))
        refs = _outputs((reference or fn)(*[x.double() for x in xs]))
        torch.cuda.synchronize()
    assert len(fused) == len(eager) == len(refs)
    shapes = [tuple(x.shape) for x in xs]
    missed = []
    for i, (got, want, ref) in enumerate(zip(fused, eager, refs)):
        assert got.dtype == want.dtype and got.shape == want.shape, (i, got.dtype, got.shape)
        ref = ref.double()
        for where in (torch.isnan, torch.isposinf, torch.isneginf):
            assert torch.equal(where(got.double()), where(ref)), (i, where.__name__)
        finite = ref.isfinite()
        top = ref[finite].abs().max().item() if finite.any() else 0.0
        atol = 2 * torch.finfo(got.dtype).eps * max(1.0, top)
        err_fused, err_eager = _max_err(got, ref, finite), _max_err(want, ref, finite)
        print(f"\n{name} {shapes} seed {seed} output {i} {tuple(got.shape)} {got.dtype}: "
              f"err_fused {err_fused:.3e} err_eager {err_eager:.3e} atol {atol:.3e}")
        if err_fused > 2 * err_eager + atol:
            missed.append((name, seed, i, err_fused, err_eager, atol))
    return missed


# Inputs at strides of their own, sent as they lie (no copy first): a
# transpose read element by element, slices of padded rows (an RMSNorm's
# and a vocabulary's), a broadcast row.
STRIDED = {
    "softmax_of_a_transpose": (lambda x: F.softmax(x, dim=-1),
                               lambda: [torch.randn(4096, 512, device="cuda").t()]),
    "rms_norm_of_a_padded_slice": (lambda x, w: F.rms_norm(x, (4096,), w, 1e-6),
                                   lambda: [torch.randn(1024, 4160, dtype=torch.bfloat16, device="cuda")[:, :4096],
                                            torch.randn(4096, dtype=torch.bfloat16, device="cuda")]),
    "softmax_of_a_padded_vocabulary": (lambda x: F.softmax(x.float(), dim=-1),
                                       lambda: [torch.randn(64, 50304, dtype=torch.bfloat16,
                                                            device="cuda")[:, :50257]]),
    "silu_mul_by_an_expanded_row": (lambda x, y: F.silu(x) * y,
                                    lambda: [torch.randn(1024, 4096, dtype=torch.bfloat16, device="cuda"),
                                             torch.randn(1, 4096, dtype=torch.bfloat16,
                                                         device="cuda").expand(1024, 4096)]),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(STRIDED))
def test_gpu_strided_inputs_match_float64(client, name):
    _gpu()
    fn, make = STRIDED[name]
    missed = []
    for seed in _seeds():
        torch.manual_seed(seed)
        xs = make()
        assert any(not x.is_contiguous() for x in xs)
        missed += _compare(client, name, fn, xs, seed)
    assert not missed, missed


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_gpu_composites_match_float64(client, name):
    """kfuse.torch's composites of the chain's primitives (activations,
    special-value tests, statistics, stacks), f32 and bf16 inputs with NaN,
    +-inf and the activations' kinks sprinkled in, against float64."""
    _gpu()
    fn = COMPOSITES[name]
    missed = []
    for seed in _seeds():
        for dtype in (torch.float32, torch.bfloat16):
            x = (torch.randn(1024, 512, generator=torch.Generator().manual_seed(seed)) * 4
                 if name in _NO_SPECIALS else _specials((1024, 512), seed))
            missed += _compare(client, f"{name} {dtype}", fn, [x.to(dtype).cuda()], seed,
                               _REFERENCES.get(name))
    assert not missed, missed


# Composites whose dtype= computes in float32 whatever the input: float64
# of the same rounded input (fn's own on a float64 input is float32's).
_REFERENCES = {"softmax_with_dtype": lambda x: F.softmax(x.half().double(), -1)}


@pytest.mark.gpu
def test_gpu_attention_between_projections_matches_float64(client):
    """The QKV projection, causal SDPA and output projection in one
    function: one plan (the attention a kernel of its own), 200 tokens
    (partial tiles), against float64."""
    _gpu()
    missed = []
    for seed in _seeds():
        torch.manual_seed(seed)
        bf16 = dict(dtype=torch.bfloat16, device="cuda")
        xs = [torch.randn(200, 256, **bf16), torch.randn(256, 768, **bf16) / 16, torch.randn(256, 256, **bf16) / 16]
        missed += _compare(client, "attention_block", attention_block, xs, seed)
    assert not missed, missed


@pytest.mark.gpu
@pytest.mark.parametrize("trace", ["fx", "aten"])
def test_gpu_attention_written_out_matches_float64(client, trace):
    """Attention as Llama's reference code writes it (float32 softmax cast
    back), traced both ways: one attention kernel, 2 x 4 heads of 200
    tokens (partial tiles), against float64."""
    _gpu()
    missed = []
    for seed in _seeds():
        torch.manual_seed(seed)
        xs = [torch.randn(2, 4, 200, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
        with kfuse.Launcher() as launcher, torch.inference_mode():
            fused = kt.fuse(written_attention, client=client, fallback="raise", launcher=launcher, trace=trace)
            missed += _check(f"written_attention {trace}", written_attention, fused, xs, seed)
            assert len(fused.plan_for(*xs).kernels) == 1
    assert not missed, missed


@pytest.mark.gpu
@pytest.mark.parametrize("trace", ["fx", "aten"])
@pytest.mark.parametrize("fn", [grouped_attention, grouped_sdpa])
def test_gpu_repeated_kv_attention_matches_float64(client, trace, fn):
    """Grouped-query attention through repeat_kv (8 query heads, 2 of k and
    v), 200 tokens: one attention kernel reading each group's k and v in
    place, against float64."""
    _gpu()
    missed = []
    for seed in _seeds():
        torch.manual_seed(seed)
        xs = [torch.randn(2, 8, 200, 64, dtype=torch.bfloat16, device="cuda"),
              torch.randn(2, 2, 200, 64, dtype=torch.bfloat16, device="cuda"),
              torch.randn(2, 2, 200, 64, dtype=torch.bfloat16, device="cuda")]
        with kfuse.Launcher() as launcher, torch.inference_mode():
            fused = kt.fuse(fn, client=client, fallback="raise", launcher=launcher, trace=trace)
            missed += _check(f"{fn.__name__} {trace}", fn, fused, xs, seed)
            assert len(fused.plan_for(*xs).kernels) == 1
    assert not missed, missed


@pytest.mark.gpu
def test_gpu_batch_norm_relu_residual_matches_float64(client):
    """Batch norm in evaluation (f32 statistics) with a ReLU and the
    residual, [32, 64, 56, 56] as a ResNet stage's, f32 and bf16."""
    _gpu()
    missed = []
    for seed in _seeds():
        g = torch.Generator().manual_seed(seed)
        for dtype in (torch.float32, torch.bfloat16):
            xs = [torch.randn(32, 64, 56, 56, generator=g).to(dtype), torch.randn(64, generator=g),
                  torch.rand(64, generator=g) + 0.1, torch.randn(64, generator=g), torch.randn(64, generator=g)]
            missed += _compare(client, f"batch_norm {dtype}", _bn_relu_residual, [x.cuda() for x in xs], seed)
    assert not missed, missed


@pytest.mark.gpu
def test_gpu_group_norm_silu_matches_float64(client):
    """GroupNorm (32 groups) and SiLU, [2, 320, 64, 64] as a diffusion
    UNet's, f32 and bf16: the groups' rows read in place by a row kernel."""
    _gpu()
    missed = []
    for seed in _seeds():
        g = torch.Generator().manual_seed(seed)
        for dtype in (torch.float32, torch.bfloat16):
            xs = [torch.randn(2, 320, 64, 64, generator=g).to(dtype), torch.randn(320, generator=g).to(dtype),
                  torch.randn(320, generator=g).to(dtype)]
            missed += _compare(client, f"group_norm {dtype}", _gn_silu32, [x.cuda() for x in xs], seed)
    assert not missed, missed


def _gn_silu32(x, w, b):
    return F.silu(F.group_norm(x, 32, w, b))


@pytest.mark.gpu
def test_gpu_layer_norm_over_several_dims_matches_float64(client):
    """LayerNorm over [C, H, W] = [64, 28, 28] with its weight and bias of
    that shape, 16 images, f32 and bf16: rows of 50176 read in place."""
    _gpu()
    missed = []
    for seed in _seeds():
        g = torch.Generator().manual_seed(seed)
        for dtype in (torch.float32, torch.bfloat16):
            xs = [torch.randn(16, 64, 28, 28, generator=g).to(dtype) * 2 + 1,
                  torch.randn(64, 28, 28, generator=g).to(dtype), torch.randn(64, 28, 28, generator=g).to(dtype)]
            missed += _compare(client, f"layer_norm_chw {dtype}", _ln_chw, [x.cuda() for x in xs], seed)
    assert not missed, missed


def _off_boundary(shape, dtype, elements):
    """A dense tensor of `shape` whose address lies `elements` past a 16-byte
    boundary (a view into a larger allocation)."""
    n = math.prod(shape)
    base = torch.randn(n + 16, dtype=dtype, device="cuda")
    skip = (-base.data_ptr() // base.element_size()) % (16 // base.element_size()) + elements
    return base[skip:skip + n].view(shape)


# Inputs whose addresses lie off the 16-byte boundary where the signature's
# plan reads them in aligned vectors: the launch is refused, and the chain is
# sent again from the boundary before each (a slice of a wider view), read
# through windows.
MISALIGNED = {
    "rms_norm_of_a_slice_one_element_in": (
        lambda x, w: F.rms_norm(x, (4096,), w, 1e-6),
        lambda: [torch.randn(1024, 4160, dtype=torch.bfloat16, device="cuda")[:, 1:4097],
                 torch.randn(4096, dtype=torch.bfloat16, device="cuda")]),
    "softmax_of_a_dense_tensor_off_its_boundary": (
        lambda x: F.softmax(x, dim=-1), lambda: [_off_boundary((512, 1000), torch.float32, 3)]),
    "product_of_a_slice_one_element_in": (  # Copied to aligned memory by a pointwise kernel first.
        lambda x, w: F.gelu(x @ w, approximate="tanh"),
        lambda: [torch.randn(200, 1032, dtype=torch.bfloat16, device="cuda")[:, 1:1025],
                 torch.randn(1024, 264, dtype=torch.bfloat16, device="cuda")]),
    "silu_mul_of_an_operand_off_its_boundary": (
        lambda x, y: F.silu(x) * y,
        lambda: [torch.randn(1024, 4096, dtype=torch.bfloat16, device="cuda"),
                 _off_boundary((1024, 4096), torch.bfloat16, 5)]),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(MISALIGNED))
def test_gpu_inputs_off_their_boundary_match_float64(client, name):
    """fallback="raise", so no call runs eagerly: the signature's plan bound
    (then refused at the address), the phased one bound and launched."""
    _gpu()
    fn, make = MISALIGNED[name]
    missed = []
    for seed in _seeds():
        torch.manual_seed(seed)
        xs = make()
        assert any(x.data_ptr() % 16 for x in xs)
        with kfuse.Launcher() as launcher, torch.inference_mode():
            fused = kt.fuse(fn, client=client, fallback="raise", launcher=launcher)
            missed += _check(name, fn, fused, xs, seed)
            missed += _check(name, fn, fused, xs, seed)  # Warm: the phased plan again.
            assert launcher.binds == 2, launcher.binds
    assert not missed, missed


@pytest.mark.gpu
def test_gpu_dynamic_rows_serve_every_count_of_their_bucket(client):
    """fuse(dynamic=True): one plan (one compile) for 1025 to 2048 rows, one
    more for a single row; each count bound on its first launch and within
    the float64 bound."""
    _gpu()
    fn = lambda x, r, w: F.rms_norm(x + r, (4096,), w, 1e-6)  # noqa: E731
    counting = CountingClient(client)
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    missed = []
    with kfuse.Launcher() as launcher:
        ff = kt.fuse(fn, client=counting, fallback="raise", launcher=launcher, dynamic=True)
        for seed in _seeds():
            torch.manual_seed(seed)
            w = torch.randn(4096, **bf16)
            for rows in (2048, 1025, 1500, 1):
                missed += _check(f"dynamic rows {rows}", fn, ff,
                                 [torch.randn(rows, 4096, **bf16), torch.randn(rows, 4096, **bf16), w], seed)
        assert counting.calls == 2 and launcher.binds == 4, (counting.calls, launcher.binds)
    assert not missed, missed


def _expect_equal_to_eager(fn, client, *args, dtype=None):
    """fn fused (fallback="raise", so one plan launched) equals eager fn on
    `args` exactly, output by output (each of `dtype` where given)."""
    with kfuse.Launcher() as launcher, torch.inference_mode():
        fused = kt.fuse(fn, client=client, fallback="raise", launcher=launcher)(*args)
        eager = fn(*args)
        torch.cuda.synchronize()
        assert launcher.binds == 1, "the plan was not launched"
    for i, (got, want) in enumerate(zip(fused, eager)):
        assert got.dtype == want.dtype and dtype in (None, got.dtype), (i, got.dtype, want.dtype)
        assert got.shape == want.shape, (i, got.shape, want.shape)
        assert torch.equal(got, want), (i, (got != want).sum().item())


@pytest.mark.gpu
def test_int64_arithmetic_fuses_exactly(client):
    """Position arithmetic in int64, as torch holds positions and labels,
    fuses into the plan (fallback="raise") and matches eager exactly, values
    far past int32 included."""
    _gpu()

    def fn(pos, offset, x):
        p = pos * 3 + offset - 7
        return p, torch.maximum(p, -pos), x * p.float(), p < pos, pos * pos  # The last wraps at 64 bits.

    torch.manual_seed(5)
    pos = torch.randint(-2**33, 2**33, (4099,), device="cuda", dtype=torch.int64)
    offset = torch.randint(-1000, 1000, (4099,), device="cuda", dtype=torch.int32)
    x = torch.randn(4099, device="cuda")
    _expect_equal_to_eager(fn, client, pos, offset, x)


@pytest.mark.gpu
def test_int64_arithmetic_in_a_row_kernel(client):
    """int64 arithmetic inside a row kernel (a softmax over scores plus a
    position bias made from int64 positions) fuses and matches eager."""
    _gpu()

    def fn(x, pos):
        return torch.softmax(x + (pos * 3 - 5).float() * 0.01, dim=-1)

    torch.manual_seed(6)
    x = torch.randn(256, 1000, device="cuda")
    pos = torch.randint(-50, 50, (256, 1000), device="cuda", dtype=torch.int64)
    with kfuse.Launcher() as launcher, torch.inference_mode():
        fused = kt.fuse(fn, client=client, fallback="raise", launcher=launcher)(x, pos)
        eager = fn(x, pos)
        ref = fn(x.double(), pos)
        torch.cuda.synchronize()
        assert launcher.binds == 1, "the plan was not launched"
    assert fused.dtype == eager.dtype
    err_fused, err_eager = (fused.double() - ref).abs().max().item(), (eager.double() - ref).abs().max().item()
    assert err_fused <= 2 * err_eager + 2 * torch.finfo(torch.float32).eps, (err_fused, err_eager)


@pytest.mark.gpu
def test_int64_reductions_fuse_exactly(client):
    """Sums of bool masks and int32 counts (int64 in torch), int64 sums past
    2^32 and their max and min, a column sum and a total of int64 values:
    one plan (fallback="raise"), equal to eager."""
    _gpu()

    def fn(mask, pos, counts):
        lengths = mask.sum(-1)
        span = pos.amax(-1) - pos.amin(-1)
        return lengths, pos.sum(-1), span, counts.sum(0), (pos * 3).sum()

    torch.manual_seed(7)
    mask = torch.rand(64, 1000, device="cuda") < 0.7
    pos = torch.randint(-2**40, 2**40, (64, 1000), device="cuda", dtype=torch.int64)
    counts = torch.randint(-2**31, 2**31 - 1, (4096, 96), device="cuda", dtype=torch.int32)
    _expect_equal_to_eager(fn, client, mask, pos, counts, dtype=torch.int64)


@pytest.mark.gpu
def test_arange_masks_by_length_in_one_kernel(client):
    """A sequence mask from torch.arange and per-row lengths, applied to
    bf16 activations: one element-wise kernel (fallback="raise"), equal to
    eager."""
    _gpu()

    def fn(x, lengths):
        pos = torch.arange(x.shape[-1], device=x.device)
        mask = pos.unsqueeze(0) < lengths.unsqueeze(1)
        return torch.where(mask, x, 0.0) * 2, mask, pos.unsqueeze(0) * 3 + lengths.unsqueeze(1)

    torch.manual_seed(8)
    x = torch.randn(64, 1000, device="cuda", dtype=torch.bfloat16)
    lengths = torch.randint(0, 1001, (64,), device="cuda", dtype=torch.int64)
    _expect_equal_to_eager(fn, client, x, lengths)


@pytest.mark.gpu
def test_a_mask_by_lengths_keeps_16_byte_vectors(client):
    """bf16 activations masked by an int64 lengths column: the column is
    read once a vector, so x moves in 8-element (16-byte) vectors, and the
    result equals eager."""
    _gpu()

    def fn(x, lengths):
        pos = torch.arange(x.shape[-1], device=x.device)
        return torch.where(pos.unsqueeze(0) < lengths.unsqueeze(1), x, 0.0) * 2

    torch.manual_seed(9)
    x = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
    lengths = torch.randint(0, 4097, (256,), device="cuda", dtype=torch.int64)
    def outputs(x, lengths):  # A tuple, as _expect_equal_to_eager compares.
        return (fn(x, lengths),)

    plan = kt.fuse(fn, client=client, fallback="raise").plan_for(x, lengths)
    assert [k.variant.params["vec"] for k in plan.kernels] == [8]
    _expect_equal_to_eager(outputs, client, x, lengths)


@pytest.mark.gpu
@pytest.mark.parametrize("scratch", ["torch", "launcher pool"])
def test_plans_with_scratch_replay_in_a_cuda_graph(client, scratch):
    """Plans that take scratch at each launch (a 1-D total, its row sliced
    over the grid with a workspace; a 2-D total, two kernels and an
    intermediate) captured in a CUDA graph, the scratch from torch's caching
    allocator (kfuse.torch's launcher) or from a kfuse.Launcher's pool, then
    replayed on new inputs."""
    _gpu()
    launcher = None if scratch == "torch" else kfuse.Launcher()
    fns = [kt.fuse(lambda v: v.sum(), client=client, fallback="raise", launcher=launcher)
           for _ in range(2)]
    xs = [torch.randn(1 << 22, device="cuda"), torch.randn(2048, 2048, device="cuda")]
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # Warm-up: compile, load the modules.
            for _ in range(2):
                for f, x in zip(fns, xs):
                    f(x)
        torch.cuda.current_stream().wait_stream(side)
        assert len(fns[1].plan_for(xs[1]).intermediates) == 1
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = [f(x) for f, x in zip(fns, xs)]
        for _ in range(2):
            for x in xs:
                x.copy_(torch.randn_like(x))
            graph.replay()
            torch.cuda.synchronize()
            for out, x in zip(outs, xs):
                ref = x.double().sum()
                assert abs(out.double() - ref).item() <= 1e-5 * x.double().abs().sum().item(), \
                    (out.item(), ref.item())
    if launcher is not None:
        launcher.close()
