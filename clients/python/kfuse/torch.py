"""Fuse a PyTorch function into one kfuse plan: trace, compile once per
signature, launch on the current stream.

    import kfuse.torch

    @kfuse.torch.fuse
    def swiglu(x, y):
        return torch.nn.functional.silu(x) * y

    out = swiglu(a, b)   # first call per dtypes/shapes/device: trace + Compile RPC + bind
    out = swiglu(a, b)   # warm: the signature checked, the outputs allocated, the launch

The first call with given input dtypes, shapes and device traces `fn` with
torch.fx (trace="fx", the default) or make_fx (trace="aten"), translates the
graph into a kfuse.Chain, checks every value's dtype and shape against the
function run on meta tensors, compiles it (client.compile) and caches the
plan. Arguments must be tensors, passed positionally. Linear layers
(F.linear, @, torch.matmul/mm/bmm/addmm, with their transposes) translate
to matrix products, which the server fuses with their element-wise
epilogues. F.scaled_dot_product_attention (and ATen's attention ops:
scaled_dot_product_attention, _scaled_dot_product_flash_attention[_for_cpu],
_efficient_attention, _cudnn_attention, _attention_math) translates with
kfuse.chain.attention: a bool attn_mask masks, a float one is added,
is_causal, scale and grouped query heads as SDPA; dropout_p != 0 is
refused by name. F.rms_norm and ATen's rms_norm and _fused_rms_norm
(arguments read by the op's schema; the rstd output refused where read)
translate with kfuse.chain.rms_norm, eps by default that of the type torch
computes in (f32; f64 for f64), the result in the input's dtype.
Sums of bools and integers are int64, as torch's (mask.sum(-1) counts in
int64). Reductions over every axis (x.sum(), torch.mean(x), amax with no dim, and
ATen's empty dim list) and F.mse_loss (ATen's mse_loss) translate as well;
the server plans them as a row kernel storing per-row results and a
kernel reducing those. F.cross_entropy and F.nll_loss (ATen's
cross_entropy_loss, nll_loss, nll_loss_nd, nll_loss_forward) translate for
inputs [N, C] or [C]: int64 or int32 class labels with ignore_index (the
label picks its logit through an iota along the row, so the loss is one
pass of a row kernel), or, for cross_entropy, probabilities; class
weights and label_smoothing are refused by name. A label outside
[0, C) that is not ignore_index gives logsumexp(x) (nothing picked) where
torch raises.

Non-contiguous inputs (a transpose, a slice of a wider tensor, an
expand) are sent as they lie, with their strides: the plan reads them in
place, with no copy first, and is compiled for those strides (another
layout is another signature). Outputs are dense, whatever the inputs'
layout (eager keeps a transposed input's layout in an element-wise result;
the values are the same).

dynamic=True (fx traces only) compiles one plan for any number of rows:
dim 0 of the first input, and of each input whose dim 0 follows it (one
that merely equals the count, a [256] weight beside 256 rows, keeps its
size), is sent as the symbol ROWS ("rows"), hinted at (and at most) the
power of two at or above the count, so kfused tunes for that bucket and
checks the winner at other counts; a call of another count in the bucket
takes the same plan with no RPC (traced and translated again, and bound on
its first launch).
Where an op depends on the count (a view's sizes, a division by it: the
chain for one row more differs), or kfused does not generate the chain
with the rows a symbol (UNIMPLEMENTED), the function compiles per shape as
with dynamic=False.

The warm path (a signature compiled before): a call like the last one
launched (per input the same dtype, device, shape and strides, compared
against that entry with no key built) goes straight to the launch; another
builds its signature (dtype, shape, and strides where not contiguous, per
input, and the device) and looks it up in `cache` without a lock
(`cache.hits` and `misses` count these lookups only). The comparison is one call of
torch's tensor guard (TensorGuards, as torch.compile guards its inputs),
made for the kind of inputs last seen: their types, requires_grad, and
dispatch keys, which inference mode changes; where torch has none, or the
kind changed, a loop over the inputs decides (and a guard is made for the
new kind, a few times per signature). The outputs are allocated on the
current device (again by name where that is another), each its own
allocation; with kfuse.Launcher the entry holds a BoundLaunch made on the
first launch (contract checked, module loaded, grid, block and scalars
fixed, argument arrays built), so a call writes the addresses into the
argument arrays, checks the ALIGNED preconditions on them and calls
cuLaunchKernel on torch's current stream. Launcher doubles without bind()
get launch() each call.

Fallbacks (never a wrong answer):
- an op it cannot translate, a non-tensor argument, an input dtype chains
  do not have (uint8, int8, int16, float8, ...), a dtype or shape the
  chain would get wrong, or a chain the server answers UNIMPLEMENTED or
  INTERNAL (its own failure: a kernel it measured wrong, a bug it met):
  the function runs eagerly for that signature, with one warning naming
  the first such op or the server's message (fallback="warn"), none
  ("silent"), or the kfuse.KfuseError ("raise");
- kfused unreachable, not answering in time or busy (UNAVAILABLE,
  DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED): eager with one warning per
  function ("warn"), silent, or the kfuse.KfuseError (kfuse.ServerUnavailable
  where unreachable; "raise"); retried after RETRY_SECONDS, doubling per
  consecutive failure of the function up to RETRY_MAX_SECONDS;
- a launch refused before anything ran (a precondition such as alignment):
  eager for that call, warned once per function ("warn"). An input whose
  address lies off the 16-byte alignment the plan asks of it is first sent
  again as the view from the boundary before it, sliced back to it in the
  chain (a plan per signature and phase, read through windows, launched
  with the boundary's address); only where no such plan is served does the
  call run eagerly;
- CPU tensors and zero-size inputs: eager, silently, with no RPC (kernels
  are GPU-only; chains have no empty dims).
A chain the server refuses otherwise (INVALID_ARGUMENT, ...) raises its
kfuse.KfuseError, with the fx node added as a note and as `.node`.
Inference only: inputs that require grad while grad mode is on raise
NotImplementedError. Python numbers the function reads from globals or a
closure are constants of the traced chain: changing them later does not
change what the fused function computes (pass them as tensors instead).
"""
import builtins
import functools
import itertools
import math
import operator
import os
import threading
import time
import warnings

try:
    import torch
except ImportError as e:  # pragma: no cover (the tests skip without torch)
    raise ImportError("kfuse.torch needs PyTorch (pip install torch)") from e

import kfuse.chain as K
from kfuse.client import Client, installed_driver_version
from kfuse.errors import FallbackWarning, KfuseError, LaunchError
from kfuse.launch import Launcher
from kfuse.plan_cache import PlanCache, chain_fingerprint, client_key
from kfuse.v1 import kfuse_pb2 as pb

# The symbol dim 0 of a dynamic=True function's inputs becomes: their rows.
ROWS = "rows"
RETRY_SECONDS = 30.0
RETRY_MAX_SECONDS = 600.0
_TRANSIENT = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED")
builtins_slice = builtins.slice
_TORCH_DTYPES = {pb.DTYPE_F32: torch.float32, pb.DTYPE_F16: torch.float16,
                 pb.DTYPE_BF16: torch.bfloat16, pb.DTYPE_I32: torch.int32,
                 pb.DTYPE_BOOL: torch.bool, pb.DTYPE_I64: torch.int64, pb.DTYPE_F64: torch.float64}
_FALLBACKS = ("warn", "raise", "silent")
_FLOAT_DTYPES = frozenset({pb.DTYPE_F32, pb.DTYPE_F16, pb.DTYPE_BF16, pb.DTYPE_F64})

# Shared by every fused function: plans by (chain fingerprint, inputs (None
# for a chain of ROWS, whose fingerprint holds its shapes), device, the
# client that compiled them, mode, target).
plans = PlanCache()
_shared = {}
_shared_lock = threading.Lock()


def _default_client():
    with _shared_lock:
        if "client" not in _shared:
            # Client's default ($KFUSE_SERVER, as for the CLI); KFUSE_ADDRESS,
            # its earlier name, still read here.
            address = os.environ.get("KFUSE_SERVER") or os.environ.get("KFUSE_ADDRESS")
            _shared["client"] = Client(address, timeout=120, on_unavailable="raise")
        return _shared["client"]


def _torch_scratch(nbytes, device, stream):
    """A plan's scratch from torch's caching allocator, on the current
    stream of `device`, the stream the plan is launched on: reused once the
    stream has passed the kernels, and counted by torch.cuda's memory
    statistics like any tensor."""
    t = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", device))
    return t.data_ptr(), t


def _default_launcher():
    with _shared_lock:
        if "launcher" not in _shared:
            _shared["launcher"] = Launcher(scratch=_torch_scratch)
        return _shared["launcher"]


class Unsupported(KfuseError):
    """A function kfuse.torch cannot translate; `node` names the fx node."""

    def __init__(self, message, node=None):
        super().__init__("UNIMPLEMENTED", message)
        self.node = node


class TooLarge(Unsupported):
    """A function whose chain is larger than kfused takes in one
    (kfuse.Chain.size_refusal); kfuse.backend cuts such regions."""


# ---------------------------------------------------------------------------
# Translation: fx nodes -> chain builder calls.

def _dim_arg(x, d):
    """torch's reduction dim: None, or an empty list as ATen writes it, is
    every axis."""
    if d is None or (isinstance(d, (list, tuple)) and not d):
        return tuple(range(x.rank))
    if isinstance(d, (list, tuple)):
        return tuple(d)
    return d


def _reduce(fn):
    def f(x, dim=None, keepdim=False, *, dtype=None):
        if dtype is not None:
            raise TypeError("dtype= is not translated")
        return fn(x, _dim_arg(x, dim), keepdim)
    return f


def _adaptive_avg_pool(dims):
    """F.adaptive_avg_pool{1,2,3}d to an output of size 1 (a global average
    pool, as classifier heads use): the mean over the last `dims` dims, kept."""
    def f(x, output_size):
        sizes = output_size if isinstance(output_size, (list, tuple)) else (output_size,) * dims
        if len(sizes) != dims or any(s != 1 for s in sizes):
            raise TypeError(f"adaptive_avg_pool{dims}d to an output other than size 1 is not translated")
        if not isinstance(x, K.Tensor) or x.rank < dims + 1:
            raise TypeError(f"adaptive_avg_pool{dims}d needs an input of {dims + 1} or more dims")
        return K.mean(x, tuple(range(-dims, 0)), True)
    return f


def _sum(x, axis, keepdim):
    """K.sum as torch sums: bools and integers into int64."""
    if x.dtype in (pb.DTYPE_BOOL, pb.DTYPE_I32):
        x = K.cast(x, "i64")
    return K.sum(x, axis, keepdim)


_MSE_REDUCTIONS = {"none": None, "mean": K.mean, "sum": K.sum}
_REDUCTION_NAMES = {0: "none", 1: "mean", 2: "sum"}  # ATen's Reduction enum.


def _mse_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
              weight=None):
    if size_average is not None or reduce is not None:
        raise TypeError("mse_loss's size_average and reduce are not translated (use reduction=)")
    if weight is not None:
        raise TypeError("mse_loss's weight is not translated")
    if reduction not in _MSE_REDUCTIONS:
        raise TypeError(f"mse_loss reduction={reduction!r}")
    d = K.square(input - target)
    fn = _MSE_REDUCTIONS[reduction]
    return d if fn is None else fn(d, tuple(range(d.rank)), False)


def _aten_mse_loss(input, target, reduction=1):  # noqa: A002
    if reduction not in _REDUCTION_NAMES:
        raise TypeError(f"mse_loss reduction={reduction!r}")
    return _mse_loss(input, target, reduction=_REDUCTION_NAMES[reduction])


def _class_loss_args(name, input, weight, size_average, reduce, label_smoothing=0.0):  # noqa: A002
    if size_average is not None or reduce is not None:
        raise TypeError(f"{name}'s size_average and reduce are not translated (use reduction=)")
    if weight is not None:
        raise TypeError(f"{name}'s weight is not translated")
    if label_smoothing:
        raise TypeError(f"{name}'s label_smoothing is not translated")
    if input.rank is None or input.rank > 2:
        raise TypeError(f"{name} over a class axis that is not the last (input of rank > 2)")


def _cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                   reduce=None, reduction="mean", label_smoothing=0.0):
    _class_loss_args("cross_entropy", input, weight, size_average, reduce, label_smoothing)
    return K.cross_entropy(input, target, ignore_index, reduction)


def _nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
              reduce=None, reduction="mean"):
    _class_loss_args("nll_loss", input, weight, size_average, reduce)
    return K.nll_loss(input, target, ignore_index, reduction)


def _aten_class_loss(fn, n_out=1):
    """ATen's cross_entropy_loss, nll_loss[_nd] and nll_loss_forward (whose
    second output, the total weight, is refused where it is read)."""
    def f(input, target, weight=None, reduction=1, ignore_index=-100, *rest):  # noqa: A002
        if reduction not in _REDUCTION_NAMES:
            raise TypeError(f"reduction={reduction!r}")
        if weight is not None:
            raise TypeError("the class weights are not translated")
        if any(rest):
            raise TypeError("label_smoothing is not translated")
        if input.rank is None or input.rank > 2:
            raise TypeError("a class axis that is not the last (input of rank > 2)")
        out = fn(input, target, ignore_index, _REDUCTION_NAMES[reduction])
        if n_out == 1:
            return out
        return (out,) + tuple(_Untranslated(f"output {i} (the total weight)") for i in range(1, n_out))
    return f


def _softmax(fn):
    def f(x, dim=None, _stacklevel=3, dtype=None):
        if dim is None:
            raise TypeError("softmax needs dim")
        # dtype=: the input cast to it first, as torch does.
        return fn(x if dtype is None else _cast(x, dtype), dim)
    return f


def _aten_softmax(fn):
    def f(x, dim, half_to_float):
        if half_to_float:
            raise TypeError("half_to_float is not translated")
        return fn(x, dim)
    return f


def _add(a, b, *, alpha=1):
    return a + (b if alpha == 1 else b * alpha)


def _sub(a, b, *, alpha=1):
    return a - (b if alpha == 1 else b * alpha)


def _div(a, b, *, rounding_mode=None):
    if rounding_mode is not None:
        raise TypeError("rounding_mode is not translated")
    return a / b


def _gelu(x, approximate="none"):
    return K.gelu(x, approximate)


def _pow(x, e):
    if not isinstance(e, (int, float)) or isinstance(e, bool):
        raise TypeError("only pow by a scalar exponent is translated")
    return x ** float(e) if isinstance(x, K.Tensor) else x ** e


def _where(cond, a, b):
    return K.where(cond, a, b)


def _standardized_rows(y, wide, eps):
    """(y - mean) / sqrt(biased variance + eps) along y's last dim, in
    `wide` (y cast to it first): the statistics of LayerNorm over several
    dims and of GroupNorm, over rows that view their input."""
    y = y if y.dtype == wide else K.cast(y, wide)
    d = K.sub(y, K.mean(y, -1, True))
    return K.mul(d, K.rsqrt(K.add(K.mean(K.mul(d, d), -1, True), float(eps))))


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, *_):
    if len(normalized_shape) == 1:
        return K.layer_norm(x, weight, bias, eps)
    # Over several trailing dims: those dims as one row of x (a view kfused
    # reads in place), its mean and biased variance, then the element-wise
    # weight and bias of their shape; in float32 for 16-bit inputs, the
    # result in x's dtype, as torch computes it.
    k = len(normalized_shape)
    if not isinstance(x, K.Tensor) or x.dtype not in _FLOAT_DTYPES or x.rank < k:
        raise TypeError(f"layer_norm over {k} dims needs a floating input of {k} or more dims")
    shape = list(x.shape)
    if list(normalized_shape) != shape[x.rank - k:] or not all(isinstance(d, int) for d in shape[x.rank - k:]):
        raise TypeError(f"layer_norm's normalized_shape {list(normalized_shape)} is not the static "
                        f"trailing dims of {shape}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError("layer_norm's eps must be a number")
    wide = _wide(x)
    z = K.reshape(_standardized_rows(K.reshape(x, shape[:x.rank - k] + [math.prod(normalized_shape)]),
                                     wide, eps), shape)

    def elementwise(t, what):
        if not isinstance(t, K.Tensor) or list(t.shape) != list(normalized_shape):
            raise TypeError(f"layer_norm's {what} must be a tensor of shape {list(normalized_shape)}")
        return t if t.dtype == wide else K.cast(t, wide)
    return _affine(z, x, elementwise, weight, bias)


def _native_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """ATen's native_layer_norm: the norm (output 0), its mean and rstd
    (outputs 1 and 2, for backward) refused where read."""
    return (_layer_norm(x, normalized_shape, weight, bias, eps),
            _Untranslated("output 1 of native_layer_norm (its mean)"),
            _Untranslated("output 2 of native_layer_norm (its rstd)"))


def _rms_norm(x, normalized_shape, weight=None, eps=None):
    """torch's rms_norm (and ATen's _fused_rms_norm output 0): over the last
    dim, eps by default that of the type it computes in (f64 for f64, else
    f32), the result in x's dtype."""
    if not isinstance(x, K.Tensor):
        raise TypeError("rms_norm of a non-tensor")
    if not isinstance(normalized_shape, (list, tuple, torch.Size)) or len(normalized_shape) != 1:
        raise TypeError("rms_norm over more than the last dim is not translated")
    if weight is not None and not isinstance(weight, K.Tensor):
        raise TypeError("rms_norm's weight must be a tensor")
    if eps is None:
        eps = torch.finfo(torch.float64 if x.dtype == pb.DTYPE_F64 else torch.float32).eps
    elif not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError("rms_norm's eps must be a number")
    y = K.rms_norm(x, weight, eps)
    return y if y.dtype == x.dtype else K.cast(y, x.dtype)


_RMS_NORM_ARGS = ("input", "normalized_shape", "weight", "eps")


def _batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                eps=1e-5):
    """torch's batch normalization in evaluation, by its running statistics:
    per channel (dim 1), (x - mean) * rsqrt(var + eps) * weight + bias in
    float32 for 16-bit inputs and statistics (as torch's kernel computes it),
    the result in x's dtype. Training (the batch's own statistics, and the
    running ones updated) is refused."""
    if training:
        raise TypeError("batch_norm in training mode (the batch's statistics) is not translated")
    if not isinstance(x, K.Tensor) or x.dtype not in _FLOAT_DTYPES or x.rank < 2:
        raise TypeError("batch_norm needs a floating input of 2 or more dims")
    if not isinstance(running_mean, K.Tensor) or not isinstance(running_var, K.Tensor):
        raise TypeError("batch_norm without running statistics (track_running_stats=False) is not translated")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError("batch_norm's eps must be a number")
    wide = _wide(x)
    per_channel = _per_channel("batch_norm", x, wide)
    y = K.sub(x if x.dtype == wide else K.cast(x, wide), per_channel(running_mean, "running_mean"))
    y = K.mul(y, K.rsqrt(K.add(per_channel(running_var, "running_var"), float(eps))))
    return _affine(y, x, per_channel, weight, bias)


def _wide(x):
    """The type a norm of x computes in: float64 for float64, else float32."""
    return pb.DTYPE_F64 if x.dtype == pb.DTYPE_F64 else pb.DTYPE_F32


def _per_channel(name, x, wide):
    """A function taking a norm's per-channel tensor (a statistic, a weight)
    to `wide`, shaped to broadcast along x's channels (dim 1)."""
    c = x.shape[1]

    def f(t, what):
        if not isinstance(t, K.Tensor) or t.rank != 1 or t.shape[0] != c:
            raise TypeError(f"{name}'s {what} must be a tensor of the {c} channels")
        t = t if t.dtype == wide else K.cast(t, wide)
        return K.reshape(t, [c] + [1] * (x.rank - 2))
    return f


def _affine(y, x, per_channel, weight, bias):
    """y * weight + bias per channel (either may be None), in x's dtype."""
    if weight is not None:
        y = K.mul(y, per_channel(weight, "weight"))
    if bias is not None:
        y = K.add(y, per_channel(bias, "bias"))
    return y if y.dtype == x.dtype else K.cast(y, x.dtype)


def _group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """torch's group normalization: x [N, C, *] as [N, G, C / G * prod(*)],
    each group's mean and biased variance, then the per-channel weight and
    bias; in float32 for 16-bit inputs, the result in x's dtype. kfused reads
    x in place as the groups' rows for the statistics, then once more for
    the output."""
    if not isinstance(x, K.Tensor) or x.dtype not in _FLOAT_DTYPES or x.rank < 2:
        raise TypeError("group_norm needs a floating input of 2 or more dims")
    shape = list(x.shape)
    if not all(isinstance(d, int) for d in shape[1:]):
        raise TypeError("group_norm needs static sizes past the batch dim")
    c = shape[1]
    if not isinstance(num_groups, int) or num_groups <= 0 or c % num_groups:
        raise TypeError(f"group_norm: {c} channels do not split into {num_groups} groups")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError("group_norm's eps must be a number")
    wide = _wide(x)
    # The groups' rows of x itself (a view kfused reads in place).
    z = _standardized_rows(K.reshape(x, [shape[0], num_groups, math.prod(shape[1:]) // num_groups]), wide, eps)
    return _affine(K.reshape(z, shape), x, _per_channel("group_norm", x, wide), weight, bias)


def _native_group_norm(x, weight, bias, n, c, hxw, group, eps):
    """ATen's native_group_norm: the norm (output 0), its mean and rstd
    refused where read."""
    return (_group_norm(x, group, weight, bias, eps),
            _Untranslated("output 1 of native_group_norm (its mean)"),
            _Untranslated("output 2 of native_group_norm (its rstd)"))


def _aten_batch_norm(name, training_arg):
    """The handler of ATen's evaluation batch norms: (input, weight, bias,
    running_mean, running_var, [training,] momentum, eps), three outputs,
    the others (the saved statistics, empty in evaluation) refused where
    read."""
    def f(x, weight, bias, running_mean, running_var, *rest):
        if training_arg:
            if not rest or rest[0] is not False:
                raise TypeError(f"{name} in training mode is not translated")
            rest = rest[1:]
        momentum, eps = (list(rest) + [0.1, 1e-5][len(rest):])[:2]
        out = _batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
        return (out,) + tuple(_Untranslated(f"output {i} of {name} (saved statistics)") for i in (1, 2))
    return f


def _aten_rms_norm(name, names, n_out):
    """The handler of ATen op `name` (rms_norm, _fused_rms_norm), whose
    arguments are `names` (its schema's order) and which has n_out outputs:
    the first the norm (translated), the others (_fused_rms_norm's rstd) an
    _Untranslated that refuses the op where it is read."""
    def f(*args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{name} takes {len(names)} arguments; got {len(args)}")
        given = dict(zip(names, args), **kwargs)
        for arg in given:
            if arg not in _RMS_NORM_ARGS:
                raise TypeError(f"{name}: argument {arg} is not translated")
        if "input" not in given or "normalized_shape" not in given:
            raise TypeError(f"{name} without input or normalized_shape")
        out = _rms_norm(*(given.get(a) for a in _RMS_NORM_ARGS))
        if n_out == 1:
            return out
        return (out,) + tuple(_Untranslated(f"output {i} of {name} (its rstd)") for i in range(1, n_out))
    return f


def _to(x, *args, **kwargs):
    """x.to(dtype), and x.to(y.device) (every tensor of a plan is on one
    device: no move), with either; a device of another kind is refused."""
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    for a in args:
        if isinstance(a, torch.dtype) and dtype is None:
            dtype = a
        elif a is _INPUTS_DEVICE and device is None:
            device = a
        else:
            raise TypeError("only .to(dtype) and .to(a tensor's .device) are translated")
    if device not in (None, _INPUTS_DEVICE) or set(kwargs) - {"copy", "non_blocking", "memory_format"}:
        raise TypeError("only .to(dtype) and .to(a tensor's .device) are translated")
    return x if dtype is None else _cast(x, dtype)


def _cast(x, dtype):
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""))
    if K.dtype_of(dtype) == x.dtype:
        return x
    return K.cast(x, dtype)


def _to_copy(x, *, dtype=None, **kwargs):
    if dtype is None or any(v is not None for k, v in kwargs.items()
                            if k in ("layout", "device", "pin_memory", "memory_format")):
        raise TypeError("only _to_copy(dtype=) is translated")
    return K.cast(x, dtype)


def _in_place_kwargs(node, kwargs):
    """_to_copy's kwargs without those that keep the value where it is: a
    strided layout, no pinning, and the device its operand is on (as
    decompositions write `.to(dtype)`: rms_norm's on the host)."""
    if _aten_name(node) != "_to_copy" or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return kwargs
    src = node.args[0].meta.get("val")
    out = dict(kwargs)
    if out.get("layout") == torch.strided:
        del out["layout"]
    if out.get("pin_memory") is False:
        del out["pin_memory"]
    if "device" in out and isinstance(src, torch.Tensor) and out["device"] is not None \
            and torch.device(out["device"]) == src.device:
        del out["device"]
    return out


def _no_inplace(fn):
    def f(x, inplace=False):
        if inplace:
            raise TypeError("inplace=True is not translated")
        return fn(x)
    return f


def _method_cast(dtype):
    return lambda x: _cast(x, dtype)


def _amax(x, dim=None, keepdim=False):
    return K.max(x, _dim_arg(x, dim), keepdim)


def _amin(x, dim=None, keepdim=False):
    return K.min(x, _dim_arg(x, dim), keepdim)


def _clamp(x, min=None, max=None):  # noqa: A002 (torch's names)
    if min is not None:
        x = K.maximum(x, min)
    if max is not None:
        x = K.minimum(x, max)
    return x


def _clamp_min(x, min):  # noqa: A002 (torch's name)
    return _clamp(x, min=min)


def _clamp_max(x, max):  # noqa: A002
    return _clamp(x, max=max)


def _not_inplace(name, inplace):
    if inplace:
        raise TypeError(f"{name}(inplace=True) is not translated")


def _hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    _not_inplace("hardtanh", inplace)
    return _clamp(x, min_val, max_val)


def _relu6(x, inplace=False):
    return _hardtanh(x, 0.0, 6.0, inplace)


def _leaky_relu(x, negative_slope=0.01, inplace=False):
    _not_inplace("leaky_relu", inplace)
    return K.where(x > 0, x, x * negative_slope)  # As torch: x > 0 ? x : x * slope.


def _hardsigmoid(x, inplace=False):
    _not_inplace("hardsigmoid", inplace)
    return K.minimum(K.maximum(x + 3.0, 0.0), 6.0) / 6.0


def _hardswish(x, inplace=False):
    _not_inplace("hardswish", inplace)
    return x * K.minimum(K.maximum(x + 3.0, 0.0), 6.0) / 6.0  # torch's order: (x * r6) / 6.


def _softplus(x, beta=1.0, threshold=20.0):
    if beta != 1 or threshold != 20:
        raise TypeError("softplus with beta or threshold other than 1 and 20 is not translated")
    return K.softplus(x)


def _mish(x, inplace=False):
    _not_inplace("mish", inplace)
    return x * K.tanh(K.softplus(x))


def _glu(x, dim=-1):
    a, b = _chunk(x, 2, dim)
    return a * K.sigmoid(b)


def _dropout(x, p=0.5, training=True, inplace=False):
    """Dropout that drops nothing (evaluation, or p = 0): x. In training it
    draws random numbers, which chains do not."""
    if training and p != 0:
        raise TypeError("dropout in training mode (training=True, p > 0) is not translated")
    _not_inplace("dropout", inplace)
    return x


def _masked_fill(x, mask, value):
    if isinstance(value, K.Tensor):
        if value.rank:
            raise TypeError("masked_fill's value must be a number or a 0-dim tensor")
        value = _cast(value, _TORCH_DTYPES[x.dtype])  # torch casts the value to x's dtype.
    return K.where(mask, value, x)


def _triangle(lower):
    """torch.tril / triu: x where the column less the row is at most (tril)
    or at least (triu) `diagonal`, else zero; over the last two dims."""
    def f(x, diagonal=0):
        if not isinstance(x, K.Tensor) or x.rank < 2:
            raise TypeError(f"{'tril' if lower else 'triu'} needs a tensor of 2 or more dims")
        if not isinstance(diagonal, int) or isinstance(diagonal, bool):
            raise TypeError(f"{'tril' if lower else 'triu'}'s diagonal must be an int")
        rows, cols = x.shape[-2], x.shape[-1]
        offset = K.sub(x.chain.iota([rows, cols], 1), x.chain.iota([rows, cols], 0))
        keep = K.le(offset, diagonal) if lower else K.ge(offset, diagonal)
        if x.dtype == pb.DTYPE_BOOL:
            return K.logical_and(x, keep)
        return K.where(keep, x, 0)
    return f


def _opmath(fn):
    """fn on x in float32 for 16-bit floats, the result in x's dtype, as
    torch computes its element-wise ops."""
    def f(x, *args, **kwargs):
        if not isinstance(x, K.Tensor) or x.dtype not in _FLOAT_DTYPES:
            raise TypeError("a floating tensor is needed")
        half = x.dtype in (pb.DTYPE_BF16, pb.DTYPE_F16)
        y = fn(K.cast(x, "f32") if half else x, *args, **kwargs)
        return K.cast(y, x.dtype) if half else y
    return f


@_opmath
def _expm1(x):
    """exp(x) - 1 to a few ulps near 0, by Kahan's quotient: with u = exp(x)
    rounded, (u - 1) * x / log(u) cancels u's rounding error."""
    u = K.exp(x)
    q = (u - 1.0) * x / K.log(u)
    q = K.where(K.eq(u, math.inf), u, q)  # x large (or +inf): inf.
    q = K.where(K.eq(u - 1.0, -1.0), -1.0, q)  # x very negative (or -inf).
    return K.where(K.eq(u, 1.0), x, q)  # x tiny: x itself (and -0 kept).


@_opmath
def _log1p(x):
    """log(1 + x) to a few ulps near 0, by Kahan's quotient: with u = 1 + x
    rounded, log(u) * x / (u - 1)."""
    u = x + 1.0
    q = K.log(u) * x / (u - 1.0)
    q = K.where(K.eq(u, math.inf), u, q)
    return K.where(K.eq(u, 1.0), x, q)


def _elu_family(x, alpha, scale, input_scale, inplace, name):
    """torch's ELU kernel: x > 0 ? x * scale : expm1(x * input_scale) * alpha * scale."""
    _not_inplace(name, inplace)
    neg = _expm1(x * input_scale if input_scale != 1 else x) * (alpha * scale)
    return K.where(x > 0, x * scale if scale != 1 else x, neg)


def _elu(x, alpha=1.0, inplace=False):
    return _elu_family(x, alpha, 1.0, 1.0, inplace, "elu")


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _selu(x, inplace=False):
    return _elu_family(x, _SELU_ALPHA, _SELU_SCALE, 1.0, inplace, "selu")


def _celu(x, alpha=1.0, inplace=False):
    return _elu_family(x, alpha, 1.0, 1.0 / alpha, inplace, "celu")


def _bce_with_logits(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                     reduction="mean", pos_weight=None):
    """F.binary_cross_entropy_with_logits: (1 - y) * x + softplus(-x),
    softplus taken as max(-x, 0) + log1p(exp(-|x|)) so no exponential
    overflows."""
    if weight is not None or pos_weight is not None or size_average is not None or reduce is not None:
        raise TypeError("binary_cross_entropy_with_logits' weight, pos_weight, size_average and reduce "
                        "are not translated")
    if reduction not in _MSE_REDUCTIONS:
        raise TypeError(f"binary_cross_entropy_with_logits reduction={reduction!r}")
    loss = (1.0 - target) * input + K.relu(-input) + _log1p(K.exp(-K.abs(input)))
    fn = _MSE_REDUCTIONS[reduction]
    return loss if fn is None else fn(loss, tuple(range(loss.rank)), False)


def _logsigmoid(x):
    """torch's log_sigmoid: min(x, 0) - log1p(exp(-|x|)), nothing overflowing."""
    return K.minimum(x, 0.0) - _log1p(K.exp(-K.abs(x)))


def _softsign(x):
    return x / (K.abs(x) + 1.0)  # F.softsign's order.


def _softmin(x, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("softmin needs dim")
    return K.softmax(-(x if dtype is None else _cast(x, dtype)), dim)


def _rsub(x, other, alpha=1):
    """other - alpha * x (aten.rsub: `1 - x` in ATen graphs)."""
    return other - (x if alpha == 1 else alpha * x)


def _isnan(x):
    return K.ne(x, x)


def _isinf(x):
    return K.eq(K.abs(x), math.inf)


def _isfinite(x):
    return K.lt(K.abs(x), math.inf)  # False for NaN too.


def _nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    if x.dtype not in _FLOAT_DTYPES:
        return x
    info = torch.finfo(_TORCH_DTYPES[x.dtype])
    x = K.where(K.ne(x, x), nan, x)
    x = K.where(K.eq(x, math.inf), info.max if posinf is None else posinf, x)
    return K.where(K.eq(x, -math.inf), info.min if neginf is None else neginf, x)


def _sign(x):
    """torch.sign: (0 < x) - (x < 0), so 0 for NaN and for -0."""
    return _cast(K.gt(x, 0), _TORCH_DTYPES[x.dtype]) - _cast(K.lt(x, 0), _TORCH_DTYPES[x.dtype])


def _fmax_fmin(pick):
    """torch.fmax / fmin: NaN only where both are."""
    def f(a, b):
        return K.where(K.ne(a, a), b, K.where(K.ne(b, b), a, pick(a, b)))
    return f


def _max_min(reduce, pick, name):
    """torch.max / min: of every element (no dim), along a dim (values and
    indices; the indices are not translated), or element-wise with
    another tensor."""
    def f(x, dim=None, keepdim=False):
        if isinstance(dim, K.Tensor):
            return pick(x, dim)
        if dim is None:
            return reduce(x, tuple(range(x.rank)), False)
        return getattr(torch.return_types, name)((reduce(x, dim, keepdim),
                                                   _Untranslated(f"the indices of {name}")))
    return f


def _lerp(a, b, weight):
    """torch.lerp as torch computes it: a + w * (b - a) where |w| < 0.5,
    b - (b - a) * (1 - w) elsewhere."""
    diff = b - a
    if isinstance(weight, (int, float)):
        return a + weight * diff if abs(weight) < 0.5 else b - diff * (1 - weight)
    return K.where(K.lt(K.abs(weight), 0.5), a + weight * diff, b - diff * (1 - weight))


def _addcmul(x, t1, t2, *, value=1):
    return x + value * t1 * t2 if value != 1 else x + t1 * t2


def _addcdiv(x, t1, t2, *, value=1):
    return x + value * (t1 / t2) if value != 1 else x + t1 / t2


def _var_parts(x, dim, unbiased, keepdim, correction, name):
    """(deviations' mean square over `dim` with `correction`, the mean), each
    in x's dtype, computed in float32 for 16-bit floats as torch does."""
    if isinstance(dim, bool):  # var(unbiased): torch's other overload.
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}: unbiased and correction together")
    if correction is None:
        correction = 0 if unbiased is False else 1
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{name} of a non-floating tensor")
    axes = _dim_arg(x, dim)
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    n = 1
    for a in axes:
        if not isinstance(x.shape[a], int):
            raise TypeError(f"{name} over a dim of no static size")
        n *= x.shape[a]
    if n - correction <= 0:
        raise TypeError(f"{name} over {n} elements with correction {correction}")
    half = x.dtype in (pb.DTYPE_BF16, pb.DTYPE_F16)
    xf = K.cast(x, "f32") if half else x
    mean = K.mean(xf, axes, keepdim=True)
    var = K.sum(K.square(xf - mean), axes, keepdim) / float(n - correction)
    if not keepdim:
        mean = K.mean(xf, axes, keepdim=False)
    back = (lambda t: K.cast(t, x.dtype)) if half else (lambda t: t)
    return var, mean, back


def _var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    var, _, back = _var_parts(x, dim, unbiased, keepdim, correction, "var")
    return back(var)


def _std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    var, _, back = _var_parts(x, dim, unbiased, keepdim, correction, "std")
    return back(K.sqrt(var))


def _var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    var, mean, back = _var_parts(x, dim, unbiased, keepdim, correction, "var_mean")
    return back(var), back(mean)


def _vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The 2-norm along `dim` (every dim where None), accumulated in
    float32 for 16-bit floats, in x's dtype."""
    if ord != 2 or dtype is not None:
        raise TypeError("only the 2-norm, in the input's dtype, is translated")
    if x.dtype not in _FLOAT_DTYPES:
        raise TypeError("the norm of a non-floating tensor")
    half = x.dtype in (pb.DTYPE_BF16, pb.DTYPE_F16)
    xf = K.cast(x, "f32") if half else x
    n = K.sqrt(K.sum(K.square(xf), _dim_arg(x, dim), keepdim))
    return K.cast(n, x.dtype) if half else n


def _norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    if p not in ("fro", 2, 2.0):
        raise TypeError(f"norm p={p!r} is not translated (the 2-norm is)")
    return _vector_norm(x, 2, dim, keepdim, dtype=dtype)


def _normalize(x, p=2.0, dim=1, eps=1e-12, out=None):
    """F.normalize: x / max(||x||, eps), the norm in x's dtype as torch's."""
    if p != 2 or out is not None:
        raise TypeError("normalize with p other than 2, or out=, is not translated")
    return x / K.maximum(_vector_norm(x, 2, dim, keepdim=True), eps)


def _logsumexp(x, dim, keepdim=False):
    """torch.logsumexp: the max, where infinite replaced by 0, taken out
    before the exponentials and added back (a row of -inf gives -inf)."""
    axes = _dim_arg(x, dim)

    def finite_max(keep):
        m = K.max(x, axes, keepdim=keep)
        return K.where(K.eq(K.abs(m), math.inf), 0.0, m)

    m = finite_max(True)
    return K.log(K.sum(K.exp(x - m), axes, keepdim)) + (m if keepdim else finite_max(False))


def _any_all(reduce):
    def f(x, dim=None, keepdim=False):
        v = x if x.dtype == pb.DTYPE_BOOL else K.ne(x, 0)
        return K.ne(reduce(K.cast(v, "i32"), _dim_arg(x, dim), keepdim), 0)
    return f


def _type_as(x, other):
    return _cast(x, _TORCH_DTYPES[other.dtype])


def _flatten(x, start_dim=0, end_dim=-1):
    shape = _static_shape(x)
    if not shape:
        return K.reshape(x, [1])
    a, b = start_dim % len(shape), end_dim % len(shape)
    n = 1
    for d in shape[a:b + 1]:
        n *= d
    return K.reshape(x, shape[:a] + [n] + shape[b + 1:])


def _squeeze(x, dim=None):
    shape = _static_shape(x)
    dims = range(len(shape)) if dim is None else (dim if isinstance(dim, (list, tuple)) else [dim])
    drop = {d % len(shape) for d in dims if shape[d % len(shape)] == 1} if shape else set()
    return K.reshape(x, [d for i, d in enumerate(shape) if i not in drop])


def _stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise TypeError("stack of no tensors")
    return K.concat([_unsqueeze(t, dim % (tensors[0].rank + 1)) for t in tensors], dim % (tensors[0].rank + 1))


def _logical(fn, name):
    """A bitwise operator (&, |, ~) on bools, where it is the logical one."""
    def f(*args):
        if not all(isinstance(a, K.Tensor) and a.dtype == pb.DTYPE_BOOL for a in args):
            raise TypeError(f"{name} on other than bool tensors is not translated")
        return fn(*args)
    return f


def _linear(x, weight, bias=None):
    return K.linear(x, weight, bias)


def _addmm(bias, a, b, *, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        raise TypeError("addmm with beta or alpha other than 1 is not translated")
    return K.matmul(a, b) + bias


def _t(x):
    if x.rank > 2:
        raise TypeError("t() of a tensor of rank above 2")
    return K.transpose(x) if x.rank == 2 else x


def _transpose(x, d0, d1):
    return K.transpose(x, d0, d1)


def _permute(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    return K.permute(x, list(dims))


def _getattr(x, name):
    if isinstance(x, tuple) and name in ("values", "indices"):  # torch.max(x, dim)'s, say.
        return getattr(x, name)
    # x.T reverses every dim; x.mT swaps the last two.
    if name == "T":
        return K.permute(x, list(reversed(range(x.rank))))
    if name == "mT":
        return K.transpose(x)
    raise TypeError(f"attribute {name} is not translated")


def _static_shape(x):
    if x.shape is None or not all(isinstance(d, int) for d in x.shape):
        raise TypeError("views need static shapes")
    return list(x.shape)


def _slice_axis(x, axis, start=None, stop=None, step=1):
    step = 1 if step is None else step
    if step <= 0:
        raise TypeError("only positive slice steps are translated")
    size = _static_shape(x)[axis]
    start, stop, step = builtins_slice(start, stop, step).indices(size)
    if (start, stop, step) == (0, size, 1):
        return x
    return K.slice(x, axis % x.rank, start, stop, step)


def _getitem(x, index):
    if isinstance(x, (tuple, list)):  # An element of a multi-output op.
        if not isinstance(index, int) or not -len(x) <= index < len(x):
            raise TypeError(f"index {index!r} of {len(x)} outputs")
        return x[index]
    index = index if isinstance(index, tuple) else (index,)
    is_int = lambda i: isinstance(i, int) and not isinstance(i, bool)  # noqa: E731
    if not all(isinstance(i, builtins_slice) or i is Ellipsis or i is None or is_int(i) for i in index):
        raise TypeError("only slices, integers, None and ... are translated (not tensors or lists)")
    if sum(i is Ellipsis for i in index) > 1:
        raise TypeError("one ellipsis at most")
    consuming = sum(i is not None and i is not Ellipsis for i in index)
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (builtins_slice(None),) * (x.rank - consuming) + index[at + 1:]
    if consuming > x.rank:
        raise TypeError("more indices than dims")
    # Slices and integers (a slice of one, its dim dropped) in place, then
    # one reshape for the dims integers drop and None inserts.
    kept, axis = [], 0  # Per output dim before the trailing ones: x's dim, or None (new).
    for i in index:
        if i is None:
            kept.append(None)
            continue
        if is_int(i):
            size = _static_shape(x)[axis]
            if not -size <= i < size:
                raise TypeError(f"index {i} is out of range for dim {axis} of size {size}")
            x = _slice_axis(x, axis, i % size, i % size + 1)
        else:
            x = _slice_axis(x, axis, i.start, i.stop, i.step)
            kept.append(axis)
        axis += 1
    if kept == list(range(axis)):
        return x
    have = _static_shape(x)
    return K.reshape(x, [1 if d is None else have[d] for d in kept] + have[axis:])


def _aten_slice(x, dim=0, start=None, end=None, step=1):
    return _slice_axis(x, dim, start, end, step)


def _aten_select(x, dim, index):
    return _getitem(x, (builtins_slice(None),) * (dim % x.rank) + (index,))


def _cat(tensors, dim=0):
    return K.concat(list(tensors), dim)


def _split_sizes(x, sizes, dim):
    bounds, at = [], 0
    for n in sizes:
        bounds.append((at, at + n))
        at += n
    return tuple(_slice_axis(x, dim, a, b) for a, b in bounds)


def _split(x, split_size, dim=0):
    size = _static_shape(x)[dim]
    if isinstance(split_size, int):
        split_size = [min(split_size, size - a) for a in range(0, size, split_size)]
    return _split_sizes(x, list(split_size), dim)


def _chunk(x, chunks, dim=0):
    size = _static_shape(x)[dim]
    return _split(x, -(-size // chunks), dim)


def _reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = shape[0]
    shape = list(shape)
    total = 1
    for d in _static_shape(x):
        total *= d
    if shape.count(-1) == 1:
        known = 1
        for d in shape:
            known *= d if d != -1 else 1
        shape[shape.index(-1)] = total // known if known else 0
    return K.reshape(x, shape)


def _unsqueeze(x, dim):
    shape = _static_shape(x)
    dim = dim % (len(shape) + 1)
    return K.reshape(x, shape[:dim] + [1] + shape[dim:])


def _expand(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = shape[0]
    have = _static_shape(x)
    off = len(shape) - len(have)
    out = [have[i - off] if d == -1 else d for i, d in enumerate(shape)]
    return K.expand(x, out)


class _Untranslated:
    """An output of a multi-output op that is not translated (attention's
    log-sum-exp, its RNG state): reading it refuses the op."""
    __slots__ = ("what",)

    def __init__(self, what):
        self.what = what


def _attention(q, k, v, mask=None, causal=False, scale=None):
    """SDPA's semantics with kfuse.chain.attention: a bool mask (True:
    attend) as `mask`; a float one as `bias` (a row it makes -inf whole
    gives zeros, as SDPA's does: the composite guards biased rows too)."""
    if not all(isinstance(t, K.Tensor) for t in (q, k, v)):
        raise TypeError("query, key and value must be tensors")
    if mask is not None and causal:
        raise TypeError("attn_mask and is_causal together")  # torch refuses it too
    kw = {}
    if mask is not None:
        if not isinstance(mask, K.Tensor):
            raise TypeError("attn_mask must be a tensor")
        if mask.dtype == pb.DTYPE_BOOL:
            kw["mask"] = mask
        else:
            kw["bias"] = mask
    if scale is not None and not isinstance(scale, (int, float)):
        raise TypeError("scale must be a number")
    return K.attention(q, k, v, causal=bool(causal), scale=scale, **kw)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    if dropout_p:
        raise TypeError(f"dropout_p={dropout_p} is not translated (dropout is random: pass "
                        "dropout_p=0.0 for inference)")
    if not enable_gqa and isinstance(query, K.Tensor) and isinstance(key, K.Tensor) \
            and query.rank >= 3 and key.rank >= 3 and query.shape[-3] != key.shape[-3]:
        raise TypeError("query and key heads differ without enable_gqa")
    return _attention(query, key, value, attn_mask, is_causal, scale)


# ATen's attention ops (which one a graph has depends on the torch version,
# the device and the decomposition). Their arguments beyond SDPA's either do
# not change the first output (enable_gqa: the chain groups heads when key
# has fewer; the others add outputs kfuse.torch does not translate) or must
# be None (dropout_mask); any other argument refuses the op.
_ATTENTION_IGNORED = frozenset({"enable_gqa", "return_debug_mask", "compute_log_sumexp"})
_ATTENTION_ARGS = frozenset({"query", "key", "value", "attn_mask", "attn_bias", "dropout_p",
                             "is_causal", "scale"})


def _aten_attention(name, names, n_out):
    """The handler of ATen op `name`, whose arguments are `names` (its
    schema's order) and which has n_out outputs (the first the attention)."""
    def f(*args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{name} takes {len(names)} arguments; got {len(args)}")
        given = dict(zip(names, args), **kwargs)
        sdpa = {}
        for arg, value in given.items():
            if arg in _ATTENTION_ARGS:
                sdpa["attn_mask" if arg == "attn_bias" else arg] = value
            elif arg == "dropout_mask":
                if value is not None:
                    raise TypeError(f"{name}: a dropout_mask is not translated")
            elif arg not in _ATTENTION_IGNORED:
                raise TypeError(f"{name}: argument {arg} is not translated")
        sdpa["enable_gqa"] = True  # These ops take grouped heads as they come.
        out = _sdpa(**sdpa)
        if n_out == 1:
            return out
        return (out,) + tuple(_Untranslated(f"output {i} of {name}") for i in range(1, n_out))
    return f


_ATTENTION_OPS = {  # name -> (argument names, outputs) where torch lacks the op's schema
    "scaled_dot_product_attention": (["query", "key", "value", "attn_mask", "dropout_p", "is_causal",
                                      "scale", "enable_gqa"], 1),
    "_scaled_dot_product_attention_math": (["query", "key", "value", "attn_mask", "dropout_p",
                                            "is_causal", "dropout_mask", "scale", "enable_gqa"], 2),
    "_scaled_dot_product_flash_attention": (["query", "key", "value", "dropout_p", "is_causal",
                                             "return_debug_mask", "scale"], 9),
    "_scaled_dot_product_flash_attention_for_cpu": (["query", "key", "value", "dropout_p",
                                                     "is_causal", "attn_mask", "scale"], 2),
    "_scaled_dot_product_efficient_attention": (["query", "key", "value", "attn_bias",
                                                 "compute_log_sumexp", "dropout_p", "is_causal",
                                                 "scale"], 4),
    "_scaled_dot_product_cudnn_attention": (["query", "key", "value", "attn_bias",
                                             "compute_log_sumexp", "dropout_p", "is_causal",
                                             "return_debug_mask", "scale"], 9),
    "_scaled_dot_product_fused_attention_overrideable": (["query", "key", "value", "attn_bias",
                                                          "dropout_p", "is_causal",
                                                          "return_debug_mask", "scale"], 9),
}


_RMS_NORM_OPS = {  # name -> (argument names, outputs) where torch lacks the op's schema
    "rms_norm": (list(_RMS_NORM_ARGS), 1),
    "_fused_rms_norm": (list(_RMS_NORM_ARGS), 2),
}


def _schema_handlers(ops, make):
    """{name: make(name, argument names, outputs)} for ATen ops `ops`, read
    from this torch's schemas where it has them."""
    out = {}
    for name, (names, n_out) in ops.items():
        try:
            schema = getattr(torch.ops.aten, name).default._schema
            names, n_out = [a.name for a in schema.arguments], len(schema.returns)
        except (AttributeError, RuntimeError):  # Not in this torch: the names above.
            pass
        out[name] = make(name, names, n_out)
    return out


def _safe_softmax(x, dim, dtype=None):
    """aten._safe_softmax: softmax, with zeros for a row that is -inf throughout."""
    if dtype is not None:
        raise TypeError("dtype= is not translated")
    m = K.max(x, dim, keepdim=True)
    e = K.exp(x - m)
    return K.where(m == -math.inf, 0.0, e / K.sum(e, dim, keepdim=True))


F = torch.nn.functional
_BASE = {
    "add": _add, "sub": _sub, "mul": K.mul, "div": _div, "neg": K.neg, "abs": K.abs,
    "exp": K.exp, "log": K.log, "sqrt": K.sqrt, "rsqrt": K.rsqrt, "tanh": K.tanh,
    "sigmoid": K.sigmoid, "relu": K.relu, "silu": K.silu, "gelu": _gelu, "square": K.square,
    "erf": K.erf, "reciprocal": K.reciprocal, "pow": _pow, "maximum": K.maximum,
    "minimum": K.minimum, "where": _where, "sum": _reduce(_sum), "mean": _reduce(K.mean),
    "amax": _amax, "amin": _amin, "softmax": _softmax(K.softmax), "log_softmax": _softmax(K.log_softmax),
    "clamp": _clamp, "eq": K.eq, "ne": K.ne, "lt": K.lt, "le": K.le, "gt": K.gt, "ge": K.ge,
    "matmul": K.matmul, "mm": K.matmul, "bmm": K.matmul, "addmm": _addmm, "t": _t,
    "transpose": _transpose, "permute": _permute, "cat": _cat, "concat": _cat, "split": _split,
    "chunk": _chunk, "reshape": _reshape, "unsqueeze": _unsqueeze,
    "sin": K.sin, "cos": K.cos, "exp2": K.exp2, "log2": K.log2, "floor": K.floor, "ceil": K.ceil,
    "clamp_min": _clamp_min, "clamp_max": _clamp_max, "clip": _clamp, "masked_fill": _masked_fill,
    "tril": _triangle(True), "triu": _triangle(False),
    "lerp": _lerp, "addcmul": _addcmul, "addcdiv": _addcdiv, "sign": _sign,
    "fmax": _fmax_fmin(K.maximum), "fmin": _fmax_fmin(K.minimum),
    "max": _max_min(K.max, K.maximum, "max"), "min": _max_min(K.min, K.minimum, "min"),
    "isnan": _isnan, "isinf": _isinf, "isfinite": _isfinite, "nan_to_num": _nan_to_num,
    "var": _var, "std": _std, "var_mean": _var_mean, "logsumexp": _logsumexp, "norm": _norm,
    "any": _any_all(K.max), "all": _any_all(K.min), "flatten": _flatten, "squeeze": _squeeze,
    "stack": _stack, "logical_and": K.logical_and, "logical_or": K.logical_or,
    "logical_not": K.logical_not, "expm1": _expm1, "log1p": _log1p,
    # Aliases torch keeps.
    "multiply": K.mul, "subtract": _sub, "divide": _div, "true_divide": _div, "negative": K.neg,
    "absolute": K.abs, "greater": K.gt, "less": K.lt, "greater_equal": K.ge, "less_equal": K.le,
    "not_equal": K.ne,
}
_FUNCTIONS = {
    operator.add: K.add, operator.sub: K.sub, operator.mul: K.mul, operator.truediv: K.div,
    operator.neg: K.neg, operator.pow: _pow, operator.abs: K.abs,
    operator.eq: K.eq, operator.ne: K.ne, operator.lt: K.lt, operator.le: K.le,
    operator.gt: K.gt, operator.ge: K.ge,
    F.relu: _no_inplace(K.relu), F.gelu: _gelu, F.silu: _no_inplace(K.silu), F.sigmoid: K.sigmoid,
    F.tanh: K.tanh,
    F.softmax: _softmax(K.softmax), F.log_softmax: _softmax(K.log_softmax),
    F.leaky_relu: _leaky_relu, F.hardtanh: _hardtanh, F.relu6: _relu6,
    F.hardsigmoid: _hardsigmoid, F.hardswish: _hardswish, F.softplus: _softplus, F.mish: _mish,
    F.glu: _glu, F.dropout: _dropout, F.normalize: _normalize, F.elu: _elu, F.selu: _selu,
    F.celu: _celu, F.binary_cross_entropy_with_logits: _bce_with_logits,
    F.logsigmoid: _logsigmoid, F.softsign: _softsign, F.softmin: _softmin,
    torch.special.expit: K.sigmoid, torch.special.expm1: _expm1, torch.special.log1p: _log1p,
    torch.special.erf: K.erf, torch.rsub: _rsub,
    torch.linalg.vector_norm: _vector_norm, torch.linalg.norm: _norm,
    operator.and_: _logical(K.logical_and, "&"), operator.or_: _logical(K.logical_or, "|"),
    operator.invert: _logical(K.logical_not, "~"),
    F.layer_norm: _layer_norm, F.linear: _linear, F.mse_loss: _mse_loss, F.batch_norm: _batch_norm,
    F.group_norm: _group_norm,
    F.adaptive_avg_pool1d: _adaptive_avg_pool(1), F.adaptive_avg_pool2d: _adaptive_avg_pool(2),
    F.adaptive_avg_pool3d: _adaptive_avg_pool(3),
    F.cross_entropy: _cross_entropy, F.nll_loss: _nll_loss,
    operator.matmul: K.matmul, getattr: _getattr,
    operator.getitem: _getitem,
}
if hasattr(F, "rms_norm"):
    _FUNCTIONS[F.rms_norm] = _rms_norm
if hasattr(F, "scaled_dot_product_attention"):
    _FUNCTIONS[F.scaled_dot_product_attention] = _sdpa
for _name, _f in _BASE.items():
    if hasattr(torch, _name):
        _FUNCTIONS[getattr(torch, _name)] = _f
_METHODS = dict(_BASE, view=_reshape, expand=_expand, to=_to, type=_to, float=_method_cast(torch.float32),
                half=_method_cast(torch.float16), bfloat16=_method_cast(torch.bfloat16),
                double=_method_cast(torch.float64), int=_method_cast(torch.int32),
                long=_method_cast(torch.int64), bool=_method_cast(torch.bool), type_as=_type_as,
                contiguous=lambda x, memory_format=None: x, detach=lambda x: x)
_ATEN = {  # OpOverloadPacket name -> builder call (make_fx graphs).
    "add": _add, "sub": _sub, "mul": K.mul, "div": _div, "neg": K.neg, "abs": K.abs,
    "exp": K.exp, "log": K.log, "sqrt": K.sqrt, "rsqrt": K.rsqrt, "tanh": K.tanh,
    "sigmoid": K.sigmoid, "relu": K.relu, "silu": K.silu, "gelu": _gelu, "erf": K.erf,
    "reciprocal": K.reciprocal, "pow": _pow, "maximum": K.maximum, "minimum": K.minimum,
    "where": _where, "sum": _reduce(_sum), "mean": _reduce(K.mean), "amax": _amax, "amin": _amin,
    "_softmax": _aten_softmax(K.softmax), "_log_softmax": _aten_softmax(K.log_softmax),
    "_to_copy": _to_copy, "clamp": _clamp, "eq": K.eq, "ne": K.ne, "lt": K.lt, "le": K.le,
    "gt": K.gt, "ge": K.ge, "square": K.square,
    "mm": K.matmul, "bmm": K.matmul, "addmm": _addmm, "t": _t, "transpose": _transpose,
    "permute": _permute, "slice": _aten_slice, "select": _aten_select, "cat": _cat, "split": _split,
    "split_with_sizes": lambda x, sizes, dim=0: _split_sizes(x, list(sizes), dim),
    "view": _reshape, "_unsafe_view": _reshape, "reshape": _reshape, "unsqueeze": _unsqueeze,
    "expand": _expand, "logical_not": K.logical_not, "_safe_softmax": _safe_softmax,
    "mse_loss": _aten_mse_loss,
    "cross_entropy_loss": _aten_class_loss(K.cross_entropy),
    "nll_loss": _aten_class_loss(K.nll_loss), "nll_loss_nd": _aten_class_loss(K.nll_loss),
    "nll_loss_forward": _aten_class_loss(K.nll_loss, n_out=2),
    "sin": K.sin, "cos": K.cos, "exp2": K.exp2, "log2": K.log2, "floor": K.floor, "ceil": K.ceil,
    "clamp_min": _clamp_min, "clamp_max": _clamp_max, "hardtanh": _hardtanh,
    "leaky_relu": _leaky_relu, "hardsigmoid": _hardsigmoid, "hardswish": _hardswish,
    "softplus": _softplus, "mish": _mish, "glu": _glu, "dropout": _dropout,
    "masked_fill": _masked_fill, "lerp": _lerp, "addcmul": _addcmul, "addcdiv": _addcdiv,
    "tril": _triangle(True), "triu": _triangle(False),
    "sign": _sign, "fmax": _fmax_fmin(K.maximum), "fmin": _fmax_fmin(K.minimum),
    "max": _max_min(K.max, K.maximum, "max"), "min": _max_min(K.min, K.minimum, "min"),
    "isnan": _isnan, "isinf": _isinf, "nan_to_num": _nan_to_num, "logsumexp": _logsumexp,
    "var": _var, "std": _std, "var_mean": _var_mean, "linalg_vector_norm": _vector_norm,
    "any": _any_all(K.max), "all": _any_all(K.min), "stack": _stack, "squeeze": _squeeze,
    "logical_and": K.logical_and, "logical_or": K.logical_or, "clone": lambda x, **_: x,
    "expm1": _expm1, "log1p": _log1p, "elu": lambda x, alpha=1.0, scale=1.0, input_scale=1.0:
    _elu_family(x, alpha, scale, input_scale, False, "elu"), "selu": _selu, "celu": _celu,
    "log_sigmoid": _logsigmoid, "rsub": _rsub, "layer_norm": _layer_norm,
    "native_layer_norm": _native_layer_norm, "native_group_norm": _native_group_norm,
    "group_norm": lambda x, num_groups, weight=None, bias=None, eps=1e-5, *_: _group_norm(
        x, num_groups, weight, bias, eps),
    "_native_batch_norm_legit_no_training": _aten_batch_norm("_native_batch_norm_legit_no_training", False),
    "native_batch_norm": _aten_batch_norm("native_batch_norm", True),
    "log_sigmoid_forward": lambda x: (_logsigmoid(x), _Untranslated("the buffer of log_sigmoid_forward")), "detach": lambda x: x, "bitwise_and": _logical(K.logical_and, "bitwise_and"),
    "bitwise_or": _logical(K.logical_or, "bitwise_or"), "bitwise_not": _logical(K.logical_not, "bitwise_not"),
}
_ATEN.update(_schema_handlers(_ATTENTION_OPS, _aten_attention))
_ATEN.update(_schema_handlers(_RMS_NORM_OPS, _aten_rms_norm))


def _handler(node):
    if node.op == "call_method":
        return _METHODS.get(node.target)
    if node.op != "call_function":
        return None
    packet = getattr(node.target, "overloadpacket", None)
    if packet is not None:  # An ATen op.
        ns = getattr(packet, "__module__", "") or ""
        name = packet.__name__
        if "aten" not in ns and "aten" not in str(packet):
            return None
        if name.endswith("_") and not name.startswith("_"):
            # In place on a temporary only this op reads (decompositions write
            # such ops): the same as the out-of-place op.
            target = node.args[0] if node.args else None
            if (not isinstance(target, torch.fx.Node) or target.op == "placeholder"
                    or len(target.users) != 1):
                return None
            name = name[:-1]
        return _ATEN.get(name)
    try:
        return _FUNCTIONS.get(node.target)
    except TypeError:  # Unhashable target.
        return None


def _factory(node):
    """The _FACTORIES name of a factory call (ATen's, or torch.arange /
    ones / zeros / full), else None."""
    if _aten_name(node) in _FACTORIES:
        return _aten_name(node)
    try:
        return _FACTORY_FUNCTIONS.get(node.target) if node.op == "call_function" else None
    except TypeError:  # Unhashable target.
        return None


def _aten_name(node):
    packet = getattr(node.target, "overloadpacket", None) if node.op == "call_function" else None
    return getattr(packet, "__name__", None)


def _scalar_tensor(chain, value, *, dtype=None, layout=None, device=None, pin_memory=None):
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError("scalar_tensor of a non-number")
    return chain.constant(value, dtype or torch.get_default_dtype())


def _filled(value):
    """torch.ones / zeros (value given) and full: the constant broadcast to
    a static size, in dtype= or the type torch gives it."""
    def f(chain, *args, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False,
          names=None):
        fill = value
        if fill is None:  # full(size, fill_value)
            if len(args) != 2:
                raise TypeError("only full(size, fill_value) is translated")
            args, fill = args[:1], args[1]
        size = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)) else args
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in size):
            raise TypeError("only static, non-empty sizes are translated")
        if not isinstance(fill, (int, float, bool)):
            raise TypeError("a fill value other than a Python number is not translated")
        if dtype is None:
            dtype = (torch.bool if isinstance(fill, bool) else torch.int64 if isinstance(fill, int) and value is None
                     else torch.get_default_dtype())
        c = chain.constant(fill, dtype)
        return K.expand(K.reshape(c, [1] * len(size)), list(size)) if size else c
    return f


def _arange(chain, *args, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    """torch.arange(end), (start, end) or (start, end, step) of Python ints:
    an iota, scaled and shifted; int64 unless dtype= says otherwise."""
    if not 1 <= len(args) <= 3 or not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        raise TypeError("only arange of Python ints is translated")
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
    if step == 0:
        raise ValueError("arange step must not be 0")
    n = builtins.max(0, -((start - end) // step))
    if n == 0:
        raise ValueError("an empty arange is not translated")
    dt = dtype or torch.int64
    x = chain.iota([n], 0, dt if dt in (torch.int32, torch.int64) else "i64")
    if step != 1:
        x = x * step
    if start != 0:
        x = x + start
    return x if K.dtype_of(dt) == x.dtype else K.cast(x, dt)


def _describe(node):
    t = node.target
    if node.op == "call_method":
        return f"Tensor.{t}"
    if hasattr(t, "overloadpacket"):
        return str(t)
    mod = getattr(t, "__module__", None) or ""
    name = getattr(t, "__name__", None) or str(t)
    return f"{mod}.{name}" if mod and mod != "_operator" else f"operator.{name}" if mod else name


def _has_tensor(values):
    found = []
    torch.fx.node.map_aggregate(values, lambda v: found.append(v) if isinstance(v, K.Tensor) else v)
    return bool(found)


def _python_value(node, args, kwargs):
    """A call that reads static metadata (x.shape, x.size(d), x.dtype) or
    computes on Python values only (sizes, constants)."""
    if node.op == "call_function" and node.target is getattr and isinstance(args[0], K.Tensor):
        if args[1] == "shape" and len(args) == 2:
            return torch.Size(args[0].shape)
        if args[1] == "ndim" and len(args) == 2:
            return len(args[0].shape)
        if args[1] == "dtype" and len(args) == 2:
            return _TORCH_DTYPES[args[0].dtype]  # For casts back (x.to(q.dtype)).
        if args[1] == "device" and len(args) == 2:
            return _INPUTS_DEVICE  # For factories (torch.arange(n, device=x.device)): the plan's.
        if args[1] in ("T", "mT") and len(args) == 2:
            return _NOT_PYTHON  # A view: translated as a permute.
        raise TypeError(f"attribute {args[1]!r} is not translated")
    if node.op == "call_method" and node.target in ("size", "dim") and isinstance(args[0], K.Tensor):
        shape = torch.Size(args[0].shape)
        if node.target == "dim":
            return len(shape)
        return shape if len(args) == 1 and not kwargs else shape[args[1] if len(args) > 1 else kwargs["dim"]]
    if _has_tensor((args, kwargs)):
        return _NOT_PYTHON
    if node.op == "call_function" and node.target in _PURE_PYTHON:
        return node.target(*args, **kwargs)
    raise TypeError("not a call on Python values")


_NOT_PYTHON = object()


class _InputsDevice:
    """x.device in a traced function: the device the plan runs on."""

    def __repr__(self):
        return "the inputs' device"


_INPUTS_DEVICE = _InputsDevice()
_FACTORIES = {"scalar_tensor": _scalar_tensor, "arange": _arange, "ones": _filled(1), "zeros": _filled(0),
              "full": _filled(None)}
_FACTORY_FUNCTIONS = {torch.arange: "arange", torch.ones: "ones", torch.zeros: "zeros", torch.full: "full"}
_PURE_PYTHON = {getattr, operator.getitem, operator.add, operator.sub, operator.mul,
                operator.truediv, operator.floordiv, operator.neg, operator.pow,
                math.sqrt, math.log, math.exp}  # A scale from a size: 1 / math.sqrt(d).


def _spec(spec):
    """(dtype, shape, strides or None where dense) of a translate spec."""
    dt, shape, *rest = spec
    return dt, shape, rest[0] if rest else None


def _spec_phase(spec):
    """A translate spec's phase (0 where it has none): see _enclosing."""
    return spec[3] if len(spec) > 3 else 0


def _unit_dim(shape, strides):
    """The innermost dim of stride 1 and size above 1 (None: none), along
    which a phased input is sent widened."""
    for d in range(len(shape) - 1, -1, -1):
        if strides[d] == 1 and shape[d] > 1:
            return d
    return None


def _enclosing(shape, strides, phase):
    """(shape, strides, dim) of the view that starts `phase` elements before
    a tensor of (shape, strides) and widens its unit-stride dim `dim` by as
    many: the tensor is that view's slice [phase:] along `dim`.

    An input whose address lies `phase` elements past a 16-byte boundary is
    sent so (its launch address moved back to the boundary): the plan then
    knows where each row starts against the vectors' alignment and reads it
    through windows, where compiled for an aligned address it would need one.
    The view spans the boundary to the tensor's last element, inside its
    storage where the storage holds `phase` elements before the tensor
    (_phases asks that), and the plan reads only the slice."""
    strides = tuple(strides) if strides is not None else _dense_strides(shape)
    d = _unit_dim(shape, strides)
    wide = list(shape)
    wide[d] += phase
    return tuple(wide), strides, d


# Allocations a decomposition makes and nothing reads: left out of the chain.
_UNREAD_ALLOCATIONS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "zeros", "ones",
                                 "full", "zeros_like", "ones_like", "full_like"})


def _meta_values(gm, specs):
    """Each node's value run on meta tensors of the specs' strides (a view
    torch refuses for them is refused here too): {node: value}."""
    seen = {}

    class _Record(torch.fx.Interpreter):
        def run_node(self, n):
            self.node = n
            v = super().run_node(n)
            seen[n] = v
            return v

        def call_function(self, target, args, kwargs):
            # A cast to the device it is on would move a meta tensor there,
            # and a factory would make its tensor on the traced device.
            kwargs = _in_place_kwargs(self.node, kwargs)
            if _factory(self.node) and kwargs.get("device") is not None:
                kwargs = dict(kwargs, device="meta")
            return super().call_function(target, args, kwargs)

    metas = []
    for dt, shape, strides in map(_spec, specs):
        if strides is None:
            metas.append(torch.empty(shape, dtype=dt, device="meta"))
        else:
            metas.append(torch.empty_strided(shape, strides, dtype=dt, device="meta"))
    out = _Record(gm).run(*metas)
    return seen, out


def translate(gm, specs, name="f"):
    """A kfuse.Chain for an fx GraphModule whose placeholders take tensors of
    `specs` ((torch dtype, shape) pairs, or (dtype, shape, strides) for an
    input at strides of its own, None meaning dense, or (dtype, shape,
    strides, phase) for one sent from the 16-byte boundary `phase` elements
    before it, as _enclosing says, its slice an op of the chain). Raises Unsupported naming the
    first node it cannot translate, or whose dtype or shape would differ
    from torch's, and TooLarge for a chain larger than kfused takes. Returns
    (chain, [fx node name per chain op index], whether the function returns
    a tuple)."""
    try:
        meta, _ = _meta_values(gm, specs)
    except Exception as e:  # noqa: BLE001 (any failure means: run eagerly)
        raise Unsupported(f"{name}: cannot run on meta tensors ({type(e).__name__}: {e})") from None
    c = K.Chain()
    env, op_nodes = {}, []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(specs):
        raise Unsupported(f"{name}: takes {len(placeholders)} arguments; got {len(specs)}")
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            spec = specs[len(env)]
            dt, shape, strides = _spec(spec)
            phase = _spec_phase(spec)
            shape = [int(d) for d in shape]
            if phase:
                wide, strides, d = _enclosing(shape, strides, phase)
            try:
                x = c.input(node.name, dt, list(wide) if phase else shape,
                            None if strides is None else [int(st) for st in strides])
            except ValueError as e:  # A dtype chains do not have (uint8, float8, ...).
                raise Unsupported(f"{name}: input '{node.name}' ({e})", node.name) from None
            if phase:
                x = K.slice(x, d, phase, phase + shape[d])
                op_nodes.append(node.name)
            env[node] = x
            continue
        if node.op == "output":
            outs = node.args[0]
            tuple_out = isinstance(outs, (list, tuple))
            value = lambda o: env.get(o) if isinstance(o, torch.fx.Node) else None  # noqa: E731
            if tuple_out:
                values = [value(o) for o in outs]
            elif isinstance(value(outs), tuple):  # A multi-output op's outputs, returned whole.
                values, tuple_out = list(value(outs)), True
            else:
                values = [value(outs)]
            for i, v in enumerate(values):
                if not isinstance(v, K.Tensor) or v.ref[0] != "op":
                    raise Unsupported(f"{name}: output {i} is not a value computed by an op")
                c.output(f"out{i}" if len(values) > 1 else "out", v)
            why = c.size_refusal()
            if why is not None:
                raise TooLarge(f"{name}: its chain has {why}")
            return c, op_nodes, tuple_out
        if not node.users and _aten_name(node) in _UNREAD_ALLOCATIONS:
            continue  # Nothing reads it (native_batch_norm's empty saved statistics).
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = torch.fx.node.map_arg(_in_place_kwargs(node, node.kwargs), lambda n: env[n])
        what = f"{name}: op {_describe(node)} (fx node '{node.name}')"
        try:
            value = (_NOT_PYTHON if _factory(node) else _python_value(node, args, kwargs))
        except Exception as e:  # noqa: BLE001
            raise Unsupported(f"{what} is not supported by kfuse.torch ({e})", node.name) from None
        if value is not _NOT_PYTHON:
            env[node] = value
            continue
        f = _handler(node)
        if f is None and _factory(node):  # Need the chain.
            f = functools.partial(_FACTORIES[_factory(node)], c)
        if f is None:
            raise Unsupported(f"{what} is not supported by kfuse.torch", node.name)
        before = len(c.ops)
        try:
            v = f(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise Unsupported(f"{what} is not supported with these arguments ({e})", node.name) from None
        op_nodes.extend([node.name] * (len(c.ops) - before))
        if isinstance(v, _Untranslated):  # An output of a multi-output op nothing reads.
            if node.users:
                raise Unsupported(f"{what}: {v.what} is not translated", node.name)
            env[node] = v
            continue
        m = meta.get(node)
        # One tensor, or (split, chunk, attention's outputs) a tuple of them.
        vs, ms = (v, m) if isinstance(v, tuple) else ((v,), (m,))
        if not isinstance(ms, (tuple, list)) or len(vs) != len(ms):
            raise Unsupported(f"{what} does not yield tensors", node.name)
        kept = [(a, b) for a, b in zip(vs, ms) if not isinstance(a, _Untranslated)]
        if (not all(isinstance(a, K.Tensor) for a, _ in kept)
                or not all(isinstance(b, torch.Tensor) for _, b in kept)):
            raise Unsupported(f"{what} does not yield tensors", node.name)
        for a, b in kept:
            if a.dtype != K.dtype_of(b.dtype) or tuple(a.shape) != tuple(b.shape):
                got = pb.DType.Name(a.dtype) if a.dtype else "?"
                raise Unsupported(f"{what}: the chain would give {got} {list(a.shape)} where "
                                  f"torch gives {b.dtype} {list(b.shape)}", node.name)
        env[node] = v
    raise Unsupported(f"{name}: the graph has no output")


# ---------------------------------------------------------------------------
# The fused function.

class _Ran:
    """What a call that ran eagerly returned."""
    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result


class _Eager:
    __slots__ = ("reason", "retry_at")

    def __init__(self, reason, retry_at=None):
        self.reason, self.retry_at = reason, retry_at


class _Fused:
    """A compiled signature: the plan; `inputs`, each input's (dtype, shape,
    strides) as the fast check of __call__ compares them, and their
    number, `arity`; `device`; each output's (shape, strides, dtype) in
    `alloc` and `empty` to allocate it on the current device; the CUDA
    ordinal (None off CUDA); once launched through a launcher that binds
    (kfuse.Launcher), the BoundLaunch, or the LaunchError that refused
    binding (a precondition on sizes); and the fast check's `guard`, from
    _guard (one attribute, so that threads see both halves together), with
    how many more may be made. `sig` is the signature it was compiled for;
    `phases` (None for most) each input's phase where it was compiled for
    addresses off the 16-byte alignment (_phases), and `shifts` the bytes
    each input's launch address lies before its tensor's."""
    __slots__ = ("plan", "inputs", "arity", "device", "outputs", "tuple_out", "alloc", "ordinal",
                 "empty", "bound", "refused", "guard", "guards_left", "sig", "phases", "shifts")

    def __init__(self, plan, inputs, outputs, tuple_out, device, phases=None):
        self.plan, self.outputs, self.tuple_out, self.device = plan, outputs, tuple_out, device
        self.sig, self.phases = tuple(inputs), phases
        self.inputs = tuple((dt, tuple(shape), tuple(strides) if strides else _dense_strides(shape))
                            for dt, shape, strides in inputs)
        self.shifts = None if phases is None else tuple(
            p * dt.itemsize for p, (dt, _, _) in zip(phases, self.inputs))
        self.arity = len(self.inputs)
        self.alloc = tuple((shape, _dense_strides(shape), dt) for dt, shape in outputs)
        self.ordinal = device.index if device.type == "cuda" else None
        self.empty = _empty_on(device)
        self.bound = self.refused = None
        self.guard, self.guards_left = _NO_GUARD, _GUARDS

    def views(self, args):
        """The inputs as the plan takes them: a phased one as the view from
        its 16-byte boundary (_enclosing)."""
        if self.phases is None:
            return args
        return [a if not p else a.as_strided(*_enclosing(a.shape, a.stride(), p)[:2],
                                             a.storage_offset() - p)
                for a, p in zip(args, self.phases)]

    def addresses(self, args, outs):
        return [*(a.data_ptr() - s for a, s in zip(args, self.shifts)), *map(_data_ptr, outs)]

    def fits(self, args):
        """Whether each phased input of `args` lies at its phase."""
        return all((a.data_ptr() - s) % 16 == 0 for a, s in zip(args, self.shifts) if s)


def _phases(plan, args):
    """Per input, its phase: the elements by which its address lies past a
    16-byte boundary, where `plan` asks it aligned (to at most 16 bytes),
    the address breaks that, and the input can be sent from the boundary
    (_enclosing: a dim of stride 1, as many elements before it in its
    storage); else 0. None where every one is 0."""
    need = {}
    for k in plan.kernels:
        for p in k.preconditions:
            if p.kind == pb.Precondition.KIND_ALIGNED and p.buffer.WhichOneof("kind") == "input":
                need[p.buffer.input] = builtins.max(need.get(p.buffer.input, 1), p.value)
    phases = [0] * len(args)
    for i, align in need.items():
        if i >= len(args) or align > 16:
            continue
        a = args[i]
        ptr, size = a.data_ptr(), a.element_size()
        off = ptr % 16
        if (ptr % align and not off % size and a.storage_offset() >= off // size
                and _unit_dim(a.shape, a.stride()) is not None):
            phases[i] = off // size
    return tuple(phases) if any(phases) else None


def _dense_strides(shape):
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= max(d, 1)
    return tuple(reversed(strides))


def _private(path):
    """A torch internal that torch.compile's generated code calls too, or None."""
    obj = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# Allocation without the dispatcher, as torch.compile's generated code does;
# CUDA's allocates on the current device, so a call checks where it went.
_empty_cpu = _private("torch._C._dynamo.guards._empty_strided_cpu")
_empty_cuda = _private("torch._C._dynamo.guards._empty_strided_cuda")
_raw_stream = _private("torch._C._cuda_getCurrentRawStream")
if _raw_stream is None:  # pragma: no cover (older torch)
    def _raw_stream(ordinal):
        return torch.cuda.current_stream(ordinal).cuda_stream


def _size_stride_py(t, size, stride):
    if t.shape != size or any(n > 1 and a != b for n, a, b in zip(size, t.stride(), stride)):
        raise AssertionError("another shape or strides")


# check(t, size, stride) raises AssertionError unless t has these sizes and
# strides (those of dims of size 1 aside): one C++ call where torch has it,
# as torch.compile's generated code makes it.
_size_stride = _private("torch._C._dynamo.guards.assert_size_stride") or _size_stride_py


def _empty_on(device):
    """empty(shape, strides, dtype) on `device`; for CUDA on the current
    device (a call checks that it is `device`)."""
    if device.type == "cpu" and _empty_cpu is not None:
        return _empty_cpu
    if device.type == "cuda" and _empty_cuda is not None:
        return _empty_cuda
    return functools.partial(_empty_any, device=device)


def _empty_any(shape, strides, dtype, device):
    return torch.empty_strided(shape, strides, dtype=dtype, device=device)


def _layout(a):
    """A tensor's strides where it is not contiguous, else None (dense)."""
    return None if a.is_contiguous() else a.stride()


def _signature(tensors):
    """(per tensor (dtype, shape, strides or None where contiguous), the
    cache key): as __call__ makes them."""
    sig = [(a.dtype, a.shape, _layout(a)) for a in tensors]
    return sig, (tuple(sig), tensors[0].device)


def _like(entry, args):
    """Whether `args` are tensors of `entry`'s signature: each the dtype,
    device, shape and strides (those of dims of size 1 aside)."""
    dev = entry.device
    try:
        for a, (dtype, size, strides) in zip(args, entry.inputs):
            if (not isinstance(a, _Tensor) or a.dtype is not dtype or a.device != dev
                    or a.is_neg()):
                return False
            _size_stride(a, size, strides)
    except (AssertionError, RuntimeError):  # Another shape or strides.
        return False
    return True


# TensorGuards(*tensors, ...).check(*args) is True when each of args has the
# type, dispatch keys (as the thread's mode applies them), dtype, device,
# requires_grad, and the sizes and strides given (None: any) of its tensor:
# one C++ call for every input, torch.compile's own tensor guard.
_tensor_guards = _private("torch._C._dynamo.guards.TensorGuards")
_GUARDS = 4  # Guards made per signature: a new one when calls change kind (mode, Parameter).
_NO_GUARD = (None, False)


def _guard(entry, args):
    """(check, whether an input requires grad) for inputs like `args`, which
    _like(entry, args) accepts: check(*inputs) is True only for inputs that
    _like accepts too (of args' kinds); _NO_GUARD where torch has no guard
    or it does not accept args."""
    if _tensor_guards is None:
        return _NO_GUARD
    sizes = [list(size) for _, size, _ in entry.inputs]
    strides = [[None if n <= 1 else st for n, st in zip(size, stride)]
               for _, size, stride in entry.inputs]
    try:
        check = _tensor_guards(*args, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides).check
        if check(*args):
            return check, any(a.requires_grad for a in args)
    except Exception:  # noqa: BLE001 (a torch whose guard takes other arguments: the loop only)
        pass
    return _NO_GUARD


_tokens = itertools.count()
_Tensor = torch.Tensor
_data_ptr = torch.Tensor.data_ptr
_starmap = itertools.starmap
_grad_enabled = torch.is_grad_enabled


class FusedFunction:
    """What fuse() returns; call it as the function. `cache` holds this
    function's entries by signature; gpu_only=False (tests, with a fake
    launcher) lets host tensors take the launch path."""

    def __init__(self, fn, client=None, fallback="warn", mode="quick", trace="fx", launcher=None,
                 dynamic=False):
        if fallback not in _FALLBACKS:
            raise ValueError(f"fallback must be one of {_FALLBACKS}; got {fallback!r}")
        if mode not in (None, "heuristic", "quick", "full"):
            raise ValueError(f"mode must be 'heuristic', 'quick' or 'full'; got {mode!r}")
        if trace not in ("fx", "aten"):
            raise ValueError(f"trace must be 'fx' or 'aten'; got {trace!r}")
        if not isinstance(dynamic, bool):
            raise ValueError(f"dynamic must be True or False; got {dynamic!r}")
        if dynamic and trace != "fx":
            # An ATen trace runs on concrete sizes: a branch on a size is
            # baked in, so one count's chain may not be another's.
            raise ValueError("dynamic=True needs trace='fx' (an fx trace has no branch on a size)")
        functools.update_wrapper(self, fn)
        self.fn, self.fallback, self.mode, self.trace = fn, fallback, mode, trace
        self.dynamic = dynamic
        self._client, self._launcher = client, launcher
        self.name = getattr(fn, "__qualname__", None) or repr(fn)
        self.cache = PlanCache()
        self.gpu_only = True
        self._token = next(_tokens)
        self._gm = None
        self._last = None  # The _Fused entry launched last through its BoundLaunch.
        self._lock = threading.Lock()
        self._warned = set()
        self._failures = 0  # Transient compile failures in a row, for the retry backoff.

    # The warm path. A call with the signature of the last one launched (each
    # input's type, dtype, device, shape and dense strides, compared against
    # that entry by one guard call, or by the loop where that is missing or
    # fails) skips the lookup; others build the signature key and look it up.
    # Then the outputs, their addresses into the bound launch, the launch, in
    # this one frame.
    def __call__(self, *args, **kwargs):
        entry = self._last
        if entry is None or kwargs or len(args) != entry.arity:
            entry = None
        else:
            check, grad = entry.guard
            if check is None or not check(*args) or grad and _grad_enabled():
                entry = self._like_last(entry, args)
        if entry is None:
            entry = self._lookup(args, kwargs)
            if type(entry) is _Ran:
                return entry.result
        # Each output its own allocation: views of one would let a resize_ of
        # one grow into the next, and keep all alive while one is.
        empty, alloc = entry.empty, entry.alloc
        n = len(alloc)  # Called one by one: starmap's calls cost more.
        if n == 1:
            outs = (empty(*alloc[0]),)
        elif n == 2:
            outs = (empty(*alloc[0]), empty(*alloc[1]))
        else:
            outs = tuple(_starmap(empty, alloc))
        ordinal = entry.ordinal
        if ordinal is None:
            stream = 0
        else:
            stream = _raw_stream(ordinal)
            if outs[0].get_device() != ordinal:  # Another device is current: allocate by name.
                outs = tuple(_empty_any(*a, device=entry.device) for a in alloc)
        bound = entry.bound
        if bound is None or entry.shifts is not None:
            return self._launch(entry, args, outs, stream)
        refusal = bound.run([*map(_data_ptr, args), *map(_data_ptr, outs)], stream)
        if refusal is not None:
            return self._refused(refusal, entry, args, outs, stream)
        self._last = entry
        return outs if entry.tuple_out else outs[0]

    def _like_last(self, entry, args):
        """`entry` (the last launched) where the loop finds `args` like it and
        none requires grad in grad mode, else None; a guard made for args'
        kind, while _GUARDS last."""
        if not _like(entry, args) or _grad_enabled() and any(a.requires_grad for a in args):
            return None
        if entry.guards_left > 0:
            entry.guards_left -= 1
            entry.guard = _guard(entry, args)
        else:  # Kinds keep changing: the loop alone.
            entry.guard = _NO_GUARD
        return entry

    def _lookup(self, args, kwargs):
        """__call__ by the signature key: the _Fused entry to launch
        (compiled on a miss), or the _Ran result of running eagerly."""
        if kwargs:
            return _Ran(self._eager_once(args, kwargs, "keyword arguments are not fused"))
        sig, dev = [], None
        grad = _grad_enabled()
        for a in args:
            if not isinstance(a, _Tensor):
                return _Ran(self._eager_once(args, kwargs, f"a {type(a).__name__} argument is not "
                                             "fused (pass tensors only)"))
            if a.is_neg() or a.is_conj():  # Lazy views: the memory holds other values.
                return _Ran(self._eager_once(args, kwargs, "a negative or conjugate view is not "
                                             "fused (resolve_neg() or resolve_conj() it first)"))
            if grad and a.requires_grad:
                raise NotImplementedError(
                    f"kfuse.torch is inference-only for now: {self.name} got an input that requires "
                    "grad; call it under torch.no_grad() / torch.inference_mode(), or detach it")
            if dev is None:
                dev = a.device
            elif a.device != dev:
                return _Ran(self._eager_once(args, kwargs, "inputs are on different devices"))
            sig.append((a.dtype, a.shape, _layout(a)))
        if dev is None:
            return _Ran(self.fn(*args))
        key = (tuple(sig), dev)
        entry = self.cache.get(key)
        if entry is None:
            if dev.type != "cuda" and self.gpu_only:
                return _Ran(self.fn(*args))
            entry = self.cache.get_or_create(key, lambda: self._build(args, sig, dev))
        if type(entry) is not _Fused:
            if entry.retry_at is not None and time.monotonic() >= entry.retry_at:
                self.cache.invalidate(key)
            return _Ran(self.fn(*args))
        if entry.ordinal is None and self.gpu_only:
            return _Ran(self.fn(*args))
        return entry

    def _launch(self, entry, args, outs, stream, first=None):
        """A launch off the warm path: one without a BoundLaunch (binds one
        through kfuse.Launcher, or calls launch() on a launcher that does
        not bind), or of a phased entry. `first`: the refusal that sent the
        call here, to a phased entry (reported if this one fails too)."""
        if entry.shifts is not None and not entry.fits(args):
            # Compiled for other phases: this call's own plan.
            if first is not None:
                return self._refused(first, entry, args, outs, stream)
            entry = self._lookup(args, {})
            if type(entry) is _Ran:
                return entry.result
            return self._launch(entry, args, outs, stream)
        launcher = self.launcher
        bind = getattr(launcher, "bind", None)
        if bind is None:
            try:
                launcher.launch(entry.plan, entry.views(args), outs, stream=stream)
            except LaunchError as e:
                if e.code not in ("FAILED_PRECONDITION", "INVALID_ARGUMENT"):
                    raise
                return self._refused(first or e, entry, args, outs, stream, first is None)
            return outs if entry.tuple_out else outs[0]
        if entry.bound is None and entry.refused is None:
            try:
                entry.bound = bind(entry.plan, entry.views(args), outs, device=entry.ordinal)
            except LaunchError as e:
                if e.code not in ("FAILED_PRECONDITION", "INVALID_ARGUMENT"):
                    raise
                entry.refused = e  # It depends on sizes only: this signature runs eagerly.
        if entry.refused is not None:
            return self._refused(first or entry.refused, entry, args, outs, stream, False)
        ptrs = entry.addresses(args, outs) if entry.shifts is not None else (
            [_data_ptr(t) for t in args] + [_data_ptr(t) for t in outs])
        refusal = entry.bound.run(ptrs, stream)
        if refusal is not None:
            return self._refused(first or refusal, entry, args, outs, stream, first is None)
        self._last = entry
        return outs if entry.tuple_out else outs[0]

    def _refused(self, error, entry, args, outs, stream, rephase=True):
        """A launch refused before anything ran: where inputs lie off the
        16-byte alignment `entry`'s plan asks (and `rephase`), launched by
        the plan compiled for where they lie (_phases); else raise, or run
        eagerly."""
        if rephase and entry.phases is None:
            phases = _phases(entry.plan, args)
            if phases is not None:
                key = (entry.sig, entry.device, phases)
                other = self.cache.get_or_create(key, lambda: self._build_phased(entry, args, phases))
                if type(other) is _Fused:
                    return self._launch(other, args, outs, stream, first=error)
                if other.retry_at is not None and time.monotonic() >= other.retry_at:
                    self.cache.invalidate(key)
        if self.fallback == "raise":
            raise error
        self._warn_once("launch", f"{error.message}; running eagerly")
        return self.fn(*args)

    @property
    def last_plan(self):
        """The plan of the last call launched through a bound launch (None
        before one): plan_for's, or, for inputs off their 16-byte boundary,
        the plan compiled for where they lie."""
        entry = self._last
        return None if entry is None else entry.plan

    @property
    def launcher(self):
        if self._launcher is None:
            self._launcher = _default_launcher()
        return self._launcher

    @property
    def client(self):
        if self._client is None:
            self._client = _default_client()
        return self._client

    # The cold path.
    def graph(self):
        """The traced torch.fx GraphModule (fx tracing; traced once)."""
        with self._lock:
            if self._gm is None:
                self._gm = torch.fx.symbolic_trace(self.fn)
            return self._gm

    def _build_phased(self, entry, args, phases):
        """_build for `args` at `phases`, where `entry` was built for their
        signature: an _Eager, not an exception, where it fails (the call
        reports the refusal that sent it here)."""
        try:
            return self._build(args, list(entry.sig), entry.device, phases)
        except KfuseError as e:
            return _Eager(e.message, self._retry_at() if e.code in _TRANSIENT else None)

    def chain_for(self, *args, phases=None):
        """(kfuse.Chain, fx node name per op, tuple output?) for these tensors
        (with `phases`, each input of a non-zero phase sent from the 16-byte
        boundary that many elements before it: _enclosing); raises
        Unsupported. No RPC."""
        specs = [(a.dtype, tuple(a.shape), _layout(a)) + ((phases[i],) if phases and phases[i] else ())
                 for i, a in enumerate(args)]
        try:
            if self.trace == "aten":
                from torch.fx.experimental.proxy_tensor import make_fx

                gm = make_fx(torch.func.functionalize(self.fn), tracing_mode="fake")(*args)
            else:
                gm = self.graph()
        except Exception as e:  # noqa: BLE001 (untraceable: run eagerly)
            raise Unsupported(f"{self.name}: cannot be traced ({type(e).__name__}: {e})") from None
        return translate(gm, specs, self.name)

    def plan_for(self, *args):
        """The cache entry for these tensors, compiling on a miss (tests use
        it with host tensors): a KernelPlan, or None where it runs eagerly."""
        sig, key = _signature(args)
        entry = self.cache.get_or_create(key, lambda: self._build(args, sig, args[0].device))
        return None if type(entry) is _Eager else entry.plan

    def _build(self, args, sig, dev, phases=None):
        if any(0 in shape for _, shape, _ in sig):
            return _Eager("a zero-size input")  # Nothing to fuse; kfused refuses empty dims.
        # A phased signature's failures go unsaid: its call reports the refusal
        # that sent it there.
        eager = self._eager if phases is None else _Eager
        try:
            chain, op_nodes, tuple_out = self.chain_for(*args, phases=phases)
        except Unsupported as e:
            if self.fallback == "raise":
                raise
            return eager(e.message)
        # Phased inputs: a plan per shape (their first rows' phases are the call's).
        rows = self._with_rows(chain, args) if self.dynamic and phases is None else None
        ordinal = dev.index if dev.index is not None else -1
        target = _target(dev)
        client = self.client

        def compiled(sent, shapes):  # A chain of ROWS has its shapes in its fingerprint: None.
            key = (chain_fingerprint(sent), shapes, ordinal, client_key(client), self.mode, target)
            return plans.get_or_create(key, lambda: self._compile(client, sent, target, dev))

        try:
            try:
                # One plan for every count of rows in the bucket, else one for these shapes.
                plan = compiled(rows, None) if rows is not None else compiled(chain, tuple(sig))
            except KfuseError as e:
                if rows is None or e.code != "UNIMPLEMENTED":
                    raise
                rows = None  # Not generated with the rows a symbol (a concat along them, say).
                plan = compiled(chain, tuple(sig))
        except _ClientFellBack:  # The client has warned.
            return _Eager("kfused is unreachable", self._retry_at())
        except KfuseError as e:
            if e.code in _TRANSIENT:
                if self.fallback == "raise":
                    raise
                retry_at = self._retry_at()
                self._warn_once("unavailable", f"{e.message}; running eagerly (asking again "
                                f"in {retry_at - time.monotonic():.0f} s)")
                return _Eager(e.message, retry_at)
            node = op_nodes[e.op] if e.op is not None and 0 <= e.op < len(op_nodes) else None
            if e.code == "UNIMPLEMENTED" and self.fallback != "raise":
                return eager(f"{self.name}: kfused cannot compile it yet: {e.message}")
            # The server's own failure (a kernel it measured wrong, say): eager
            # is right, so it runs instead.
            if e.code == "INTERNAL" and self.fallback != "raise":
                return eager(f"{self.name}: kfused failed to build it: {e.message}")
            e.node = node
            e.add_note(f"kfuse.torch: while compiling {self.name}"
                       + (f" (op {e.op} is fx node '{node}')" if node else ""))
            raise
        self._failures = 0
        self._warn_compute_bound(plan)
        outputs = []
        sizes = {ROWS: args[0].shape[0]} if rows is not None else {}
        for spec in plan.outputs:
            dims = [d.size if d.WhichOneof("kind") == "size" else sizes.get(d.symbol) for d in spec.shape]
            if None in dims or spec.dtype not in _TORCH_DTYPES:
                return eager(f"{self.name}: the plan's output '{spec.name}' has a shape or "
                                   "dtype that is not static")
            outputs.append((_TORCH_DTYPES[spec.dtype], tuple(dims)))
        want = [(m.dtype, tuple(m.shape)) for m in _meta_outputs(self, args, tuple_out)]
        if outputs != want:
            return eager(f"{self.name}: the plan's outputs {outputs} differ from torch's {want}")
        return _Fused(plan, sig, outputs, tuple_out, dev, phases)

    # Whether a plan whose products are compute-bound is warned of (a
    # kfuse.backend region's products were left in it on purpose).
    warns_of_compute_bound = True

    def _warn_compute_bound(self, plan):
        """One warning per function whose plan has compute-bound matrix
        products (kfused's roofline verdict) predicted to take 10 us or more
        (smaller ones are the launch's): kfuse's mma.sync products run at
        about 0.6 of cuBLAS's on Hopper (docs/performance.md), so such a
        function may be slower fused than eager."""
        heavy = [k for k in plan.kernels
                 if k.variant.family == pb.FAMILY_MATMUL and k.report.bound == pb.BOUND_COMPUTE]
        if sum(k.report.predicted_seconds for k in heavy) >= 10e-6 and self.warns_of_compute_bound:
            gflop = sum(k.report.flops.tensor for k in heavy) / 1e9
            self._warn_once("compute-bound", (
                f"{self.name}: its plan has {len(heavy)} compute-bound matrix product(s) "
                f"({gflop:.3g} GFLOP), which kfuse runs at about 0.6 of cuBLAS's speed, so it may "
                "be slower than eager; torch.compile(fn, backend=\"kfuse\") leaves such products to "
                "PyTorch and fuses the rest"))

    def _with_rows(self, chain, args):
        """`chain` as a kfuse.v1.Chain with dim 0 of the first input, and of
        the other inputs whose dim 0 follows it, as the symbol ROWS, hinted at
        (and at most) the power of two at or above that count (kfused tunes
        for that bucket, and every count in it shares the plan); None where
        the function does not translate to the same chain for one row more
        but for those dims (an op's attribute depends on the count: a view's
        sizes, a division by it), or has no rows to vary.

        An input whose dim 0 only happens to equal the count (a [256] weight
        beside 256 rows) does not follow it: with every such input marked the
        probe fails, so each is tried unmarked in turn, then the first input
        alone."""
        n = args[0].shape[0] if args and args[0].dim() > 0 else 0
        if n < 1:
            return None
        # Inputs whose rows lie outermost (their strides then hold for any
        # count; the launcher checks each call's against the plan's anyway).
        marked = [a.dim() > 0 and a.shape[0] == n and
                  (a.is_contiguous() or a.stride()[0] in (0, builtins.max(a.stride()))) for a in args]
        tries = [marked]
        tries += [[m and j != i for j, m in enumerate(marked)] for i in range(1, len(args)) if marked[i]]
        if len(tries) > 2:
            tries.append([i == 0 and m for i, m in enumerate(marked)])
        mine = chain.to_proto()
        for rows in tries:
            if rows[0] and self._same_for_one_more(mine, args, rows, n):
                break
        else:
            return None
        # At most the bucket (other buckets have plans of their own), so the
        # kernels may index in 32 bits where that holds.
        bucket = 1 << (n - 1).bit_length()
        for spec, m in zip(mine.inputs, rows):
            if m:
                spec.shape[0].CopyFrom(pb.Dim(symbol=ROWS, hint=bucket, max=bucket))
        return mine

    def _same_for_one_more(self, mine, args, rows, n):
        """Whether the function translates to `mine` (a kfuse.v1.Chain) but
        for dim 0 of the inputs `rows` marks with n + 1 rows there."""
        probe = [(a.dtype, (n + 1, *a.shape[1:]) if m else tuple(a.shape), _layout(a))
                 for a, m in zip(args, rows)]
        try:
            other = translate(self.graph(), probe, self.name)[0].to_proto()
        except Unsupported:
            return False
        for spec, m in zip(other.inputs, rows):
            if m:
                spec.shape[0].size = n
        return other == mine

    def _compile(self, client, chain, target, dev):
        resp = client.compile(chain, target=target, mode=self.mode, env=_environment(dev))
        if resp is None:  # The client ran with on_unavailable="eager" and has warned.
            raise _ClientFellBack()
        return resp.plan

    def _retry_at(self):
        """When to ask kfused again after a transient failure: RETRY_SECONDS
        from now, doubling with each failure in a row, at most
        RETRY_MAX_SECONDS."""
        with self._lock:
            self._failures += 1
            n = min(self._failures, 32)
        return time.monotonic() + min(RETRY_SECONDS * 2 ** (n - 1), RETRY_MAX_SECONDS)

    def _eager(self, reason):
        self._warn_once(("eager", reason), reason + "; running eagerly")
        return _Eager(reason)

    def _eager_once(self, args, kwargs, reason):
        if self.fallback == "raise":
            raise Unsupported(f"{self.name}: {reason}")
        self._warn_once(("call", reason), f"{self.name}: {reason}; running eagerly")
        return self.fn(*args, **kwargs)

    def _warn_once(self, key, message):
        warn_once(self, key, f"kfuse.torch: {message}")


def warn_once(owner, key, message, stacklevel=5):
    """One FallbackWarning per `key` of `owner` (which has fallback, _lock and
    _warned), none when owner.fallback is "silent"."""
    if owner.fallback == "silent":
        return
    with owner._lock:
        if key in owner._warned:
            return
        owner._warned.add(key)
    warnings.warn(message, FallbackWarning, stacklevel=stacklevel)


class _ClientFellBack(Exception):
    pass


def _target(dev):
    """The compute capability to compile for (0: the server's GPU)."""
    if dev.type != "cuda":
        return 0
    major, minor = torch.cuda.get_device_capability(dev)
    return major * 10 + minor


@functools.lru_cache(maxsize=None)
def _environment(dev):
    """The ClientEnvironment sent with each compile: informational (the
    server logs it with the build; it is in no key). The device's name,
    compute capability, SMs, memory and L2 from torch; the installed
    driver's version (0 where none is)."""
    env = pb.ClientEnvironment()
    if dev.type != "cuda":
        return env
    p = torch.cuda.get_device_properties(dev)
    d = env.device
    d.name, d.cc_major, d.cc_minor = p.name, p.major, p.minor
    d.sm_count, d.memory_bytes = p.multi_processor_count, p.total_memory
    d.l2_bytes = getattr(p, "L2_cache_size", 0)
    env.driver_version = installed_driver_version()
    return env


def _meta_outputs(ff, args, tuple_out):
    metas = [torch.empty(a.shape, dtype=a.dtype, device="meta") for a in args]
    out = ff.fn(*metas)
    return list(out) if tuple_out else [out]


def fuse(fn=None, *, client=None, fallback="warn", mode="quick", trace="fx", launcher=None, dynamic=False):
    """Decorator: @fuse or @fuse(client=..., fallback="warn"|"raise"|"silent",
    mode="heuristic"|"quick"|"full", trace="fx"|"aten", dynamic=False|True).
    See the module docstring."""
    if fn is None:
        return lambda f: FusedFunction(f, client, fallback, mode, trace, launcher, dynamic)
    return FusedFunction(fn, client, fallback, mode, trace, launcher, dynamic)


__all__ = ["fuse", "FusedFunction", "translate", "Unsupported", "TooLarge", "plans", "ROWS", "RETRY_SECONDS",
           "RETRY_MAX_SECONDS"]
