"""The chain builder: write element-wise code on symbolic tensors, get a
kfuse.v1.Chain (the wire message) or its JSON in the CLI's format.

    import kfuse
    c = kfuse.Chain()
    x = c.input("x", "bf16", [kfuse.Sym("M", hint=32768), 4096])
    b = c.input("bias", "bf16", [4096])
    c.output("y", kfuse.gelu(x + b, approximate="tanh"))
    c.to_json()      # the same chain as examples/gelu_bias_bf16.json

Ops are appended in the order they are built; Python numbers become
OP_CONSTANT ops without a dtype (weak scalars, as in PyTorch; a float is
marked weak_float, so 2.0 stays a float). Composites
(softmax, norms, attention, linear) expand into the primitives the proto
has; the server recognises the patterns it schedules specially. Shapes and
dtypes are tracked only as far as composites need them (ranks, head dims).
"""
import builtins
import math
import operator

from google.protobuf import json_format

from kfuse.v1 import kfuse_pb2 as pb

_DTYPES = {
    "f32": pb.DTYPE_F32, "float32": pb.DTYPE_F32, "float": pb.DTYPE_F32,
    "f16": pb.DTYPE_F16, "float16": pb.DTYPE_F16, "half": pb.DTYPE_F16,
    "bf16": pb.DTYPE_BF16, "bfloat16": pb.DTYPE_BF16,
    "i32": pb.DTYPE_I32, "int32": pb.DTYPE_I32,
    "bool": pb.DTYPE_BOOL,
    "i64": pb.DTYPE_I64, "int64": pb.DTYPE_I64,
    "f64": pb.DTYPE_F64, "float64": pb.DTYPE_F64,
}
_FLOATS = (pb.DTYPE_F16, pb.DTYPE_BF16, pb.DTYPE_F32, pb.DTYPE_F64)
_INTS = (pb.DTYPE_I32, pb.DTYPE_I64)


def dtype_of(d):
    """A wire DType from "f32", "bfloat16", a torch.dtype, or a DType value."""
    if d is None:
        return None
    if isinstance(d, int):
        if d not in pb.DType.values() or d == pb.DTYPE_UNSPECIFIED:
            raise ValueError(f"unknown dtype {d}")
        return d
    name = str(d).replace("torch.", "").lower()
    if name.startswith("dtype_"):
        name = name[len("dtype_"):]
    if name not in _DTYPES:
        raise ValueError(f"unknown dtype {d!r}; one of {sorted(_DTYPES)}")
    return _DTYPES[name]


class Sym:
    """A runtime-sized dim: `name` is shared by dims of one size at launch;
    `hint` is the size to tune for, `max` an upper bound if known."""

    def __init__(self, name, hint=0, max=0):  # noqa: A002 (proto field name)
        if not name:
            raise ValueError("a symbol needs a name")
        self.name, self.hint, self.max = name, int(hint), int(max)

    def __repr__(self):
        return f"Sym({self.name!r}, hint={self.hint})"


def _dim_proto(d):
    if isinstance(d, Sym):
        return pb.Dim(symbol=d.name, hint=d.hint, max=d.max)
    if isinstance(d, str):
        return pb.Dim(symbol=d)
    if isinstance(d, int) and not isinstance(d, bool) and d >= 0:
        return pb.Dim(size=d)
    raise ValueError(f"a dim is a size >= 0, a symbol name or a Sym; got {d!r}")


def _dim_value(dim):
    """The builder's view of a Dim proto: an int or the symbol's name."""
    return dim.size if dim.WhichOneof("kind") == "size" else dim.symbol


def _broadcast(shapes):
    if any(s is None for s in shapes):
        return None
    rank = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        big = [d for d in dims if d != 1]
        out.append(big[0] if big else 1)
    return tuple(out)


def _promote(dtypes, weak_float=False, weak_int=False):
    """The dtype kfused gives an element-wise op of tensors of `dtypes` and
    Python scalars (a float among them: `weak_float`; an int: `weak_int`;
    a bool is sent typed, so its DTYPE_BOOL is among `dtypes`)."""
    if not dtypes:  # Scalars alone: held in f32 or i32.
        return pb.DTYPE_F32 if weak_float else pb.DTYPE_I32 if weak_int else None
    known = [d for d in dtypes if d is not None]
    if not known:
        return None
    floats = [d for d in known if d in _FLOATS]
    if floats:
        if pb.DTYPE_F64 in floats:
            return pb.DTYPE_F64
        if pb.DTYPE_F32 in floats or len(set(floats)) > 1:
            return pb.DTYPE_F32
        return floats[0]
    if weak_float:
        return pb.DTYPE_F32
    ints = [d for d in known if d in _INTS]
    if ints:
        return pb.DTYPE_I64 if pb.DTYPE_I64 in ints else pb.DTYPE_I32
    return pb.DTYPE_I32 if weak_int else pb.DTYPE_BOOL  # bool + 2 is i32.


class Tensor:
    """A value of a chain: an input or the result of an op. Supports
    + - * / ** and unary -, comparisons (==, !=, <, <=, >, >= build ops),
    & | ~ on booleans."""

    __slots__ = ("chain", "ref", "dtype", "shape")

    def __init__(self, chain, ref, dtype, shape):
        self.chain, self.ref, self.dtype, self.shape = chain, ref, dtype, shape

    @property
    def rank(self):
        if self.shape is None:
            raise ValueError(f"the rank of {self!r} is unknown (an op of a chain read from JSON)")
        return len(self.shape)

    def __repr__(self):
        kind, i = self.ref
        dt = pb.DType.Name(self.dtype) if self.dtype else "?"
        return f"Tensor({kind} {i}, {dt}, {self.shape})"

    __hash__ = object.__hash__

    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return sub(self, o)
    def __rsub__(self, o): return sub(o, self)
    def __mul__(self, o): return mul(self, o)
    def __rmul__(self, o): return mul(o, self)
    def __truediv__(self, o): return div(self, o)
    def __rtruediv__(self, o): return div(o, self)
    def __pow__(self, o): return pow(self, o)
    def __rpow__(self, o): return pow(o, self)
    def __neg__(self): return neg(self)
    def __abs__(self): return abs(self)
    def __eq__(self, o): return eq(self, o)  # noqa: E704
    def __ne__(self, o): return ne(self, o)
    def __lt__(self, o): return lt(self, o)
    def __le__(self, o): return le(self, o)
    def __gt__(self, o): return gt(self, o)
    def __ge__(self, o): return ge(self, o)
    # Logical on bool tensors; on integers PyTorch's &, | and ~ are bitwise,
    # which kfuse has not: refused rather than given another meaning.
    def __and__(self, o): return logical_and(*_bools("&", self, o))
    def __rand__(self, o): return logical_and(*_bools("&", o, self))
    def __or__(self, o): return logical_or(*_bools("|", self, o))
    def __ror__(self, o): return logical_or(*_bools("|", o, self))
    def __invert__(self): return logical_not(*_bools("~", self))
    def __matmul__(self, o): return matmul(self, o)

    def sum(self, axis=-1, keepdim=False): return sum(self, axis, keepdim)
    def max(self, axis=-1, keepdim=False): return max(self, axis, keepdim)
    def min(self, axis=-1, keepdim=False): return min(self, axis, keepdim)
    def mean(self, axis=-1, keepdim=False): return mean(self, axis, keepdim)
    def cast(self, dtype): return cast(self, dtype)
    def transpose(self, d0=-2, d1=-1): return transpose(self, d0, d1)
    def reshape(self, shape): return reshape(self, shape)


# What kfused takes in one chain (its codegen/validate.h Limits), and the
# kernels a plan holds (service/pipeline.h kMaxPlanKernels).
LIMITS = {"ops": 512, "inputs": 64, "outputs": 64}
MAX_PLAN_KERNELS = 128


class Chain:
    """A chain under construction; see the module docstring."""

    def __init__(self):
        self._proto = pb.Chain()
        self._inputs = []
        self._ops = []

    # Building.
    def input(self, name, dtype, shape, strides=None):
        dt = dtype_of(dtype)
        spec = pb.TensorSpec(name=name, dtype=dt, shape=[_dim_proto(d) for d in shape],
                             strides=list(strides or []))
        self._proto.inputs.append(spec)
        t = Tensor(self, ("input", len(self._inputs)), dt, tuple(_dim_value(d) for d in spec.shape))
        self._inputs.append(t)
        return t

    def output(self, name, value):
        if not isinstance(value, Tensor) or value.chain is not self:
            raise ValueError(f"output {name!r} must be a tensor of this chain")
        kind, i = value.ref
        self._proto.outputs.append(pb.Output(name=name, value=pb.Ref(**{kind: i})))
        return value

    def constant(self, value, dtype=None):
        """A scalar: held in `dtype`, or without one a weak scalar typed by
        its use as a Python number is in PyTorch. A Python float stays a
        float when whole (weak_float: i32 tensor * 2.0 is f32, * 2 is i32)."""
        dt = dtype_of(dtype)
        if dt is None and isinstance(value, bool):
            # Typed: bool is below every other type, so beside a tensor it
            # leaves that tensor's type, as PyTorch's wrapped bool does, and
            # where(c, True, False) stays bool.
            dt = pb.DTYPE_BOOL
        op = pb.Op(kind=pb.OP_CONSTANT, value=float(value))
        if dt:
            op.dtype = dt
        elif isinstance(value, float) and value.is_integer():  # Only a whole float needs saying so.
            op.weak_float = True
        shape = ()
        return self._append(op, dt if dt else (pb.DTYPE_F32 if isinstance(value, float) else None),
                            shape)

    def iota(self, shape, axis, dtype="i32"):
        """Index along `axis` of a tensor of `shape`, in `dtype`."""
        dt = dtype_of(dtype)
        rank = len(shape)
        op = pb.Op(kind=pb.OP_IOTA, dtype=dt, shape=pb.ShapeAttrs(shape=[_dim_proto(d) for d in shape]),
                   axis=pb.AxisAttrs(axis=_axis(rank, axis) if rank else 0))
        return self._append(op, dt, tuple(d.name if isinstance(d, Sym) else d for d in shape))

    def _append(self, op, dtype, shape):
        self._proto.ops.append(op)
        t = Tensor(self, ("op", len(self._ops)), dtype, shape)
        self._ops.append(t)
        return t

    # Reading.
    @property
    def inputs(self):
        return list(self._inputs)

    @property
    def ops(self):
        return list(self._ops)

    def size_refusal(self):
        """Why kfused would refuse the chain for its size, or None: more
        ops, inputs or outputs than LIMITS, or more matrix products than a
        plan holds kernels (each starts one; an attention's two are one
        kernel, so this is a bound, not the count)."""
        counts = {"ops": len(self._proto.ops), "inputs": len(self._proto.inputs),
                  "outputs": len(self._proto.outputs)}
        for what, n in counts.items():
            if n > LIMITS[what]:
                return f"{n} {what}, more than kfused takes in one chain ({LIMITS[what]})"
        products = builtins.sum(1 for op in self._proto.ops if op.kind == pb.OP_MATMUL)
        if products > MAX_PLAN_KERNELS:
            return (f"{products} matrix products, each a kernel of its own: more than a plan "
                    f"holds ({MAX_PLAN_KERNELS} kernels)")
        return None

    def to_proto(self):
        """A copy of the chain as a kfuse.v1.Chain."""
        c = pb.Chain()
        c.CopyFrom(self._proto)
        return c

    def to_json(self, indent=2):
        """The proto JSON mapping, as the CLI reads it (examples/*.json)."""
        return json_format.MessageToJson(self._proto, indent=indent)

    @classmethod
    def from_proto(cls, proto):
        c = cls()
        c._proto.CopyFrom(proto)
        for i, spec in enumerate(proto.inputs):
            c._inputs.append(Tensor(c, ("input", i), spec.dtype or None,
                                    tuple(_dim_value(d) for d in spec.shape)))
        for j, op in enumerate(proto.ops):
            c._ops.append(Tensor(c, ("op", j), op.dtype or None, None))
        return c

    @classmethod
    def from_json(cls, text):
        """A Chain from the CLI's JSON: a Chain, or a CompileRequest's chain."""
        import json

        if isinstance(text, (bytes, bytearray)):  # As json.loads takes them.
            text = text.decode("utf-8")
        # As the CLI bounds it (core/json_depth.h), before parsing: how deep
        # json.loads goes before a RecursionError differs between Pythons.
        if _json_depth(text) > _MAX_JSON_DEPTH:
            raise ValueError(f"the JSON nests too deeply for a chain (more than {_MAX_JSON_DEPTH} levels)")
        repeats = []  # (object, key): a repeated key is not for a reader to guess, as the CLI says.

        def unique_keys(pairs):
            obj = dict(pairs)
            if len(obj) < len(pairs):
                seen = set()
                key = next(k for k, _ in pairs if k in seen or seen.add(k))
                repeats.append((obj, key))
            return obj

        try:
            doc = json.loads(text, object_pairs_hook=unique_keys)
        except RecursionError:
            raise ValueError("the JSON nests too deeply for a chain") from None
        if repeats:
            obj, key = repeats[0]
            where = _path_to(doc, obj)
            raise ValueError(f"{where + ': ' if where else ''}the key {key!r} again in one object of the chain's JSON")
        if not isinstance(doc, dict):
            raise ValueError(f"a chain's JSON is an object (a Chain or a CompileRequest), not {type(doc).__name__}")
        message = pb.CompileRequest() if "chain" in doc else pb.Chain()
        _check_fields(doc, message.DESCRIPTOR, "")
        json_format.ParseDict(doc, message)
        return cls.from_proto(message.chain if "chain" in doc else message)

    def __repr__(self):
        return (f"Chain({len(self._proto.inputs)} inputs, {len(self._proto.ops)} ops, "
                f"{len(self._proto.outputs)} outputs)")


_MAX_JSON_DEPTH = 100  # Deeper than any chain (about 6), as the CLI's.
_DATA_TYPES = ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue")


def _repeated(field):
    """Whether `field` is repeated, in protobuf releases with
    `FieldDescriptor.label` and in those that replaced it by `is_repeated`."""
    repeated = getattr(field, "is_repeated", None)
    return repeated if isinstance(repeated, bool) else field.label == field.LABEL_REPEATED


def _check_fields(doc, descriptor, path):
    """As the CLI reads a chain file: a field given under both its names
    (`weak_float` and `weakFloat`) is given twice, and a repeated field's
    value is a list of items, none of them a list or null (each refused
    with the field's path). `doc` is the parsed JSON object for
    `descriptor`."""
    seen = {}
    for key, value in doc.items():
        field = descriptor.fields_by_name.get(key) or next(
            (f for f in descriptor.fields if f.json_name == key), None)
        if field is None:
            continue  # Unknown: json_format names it.
        if field.name in seen:
            raise ValueError(f"{path}{key}: the field {field.name!r} again in one object of the chain's JSON, "
                             f"as {seen[field.name]!r} before")
        seen[field.name] = key
        typed = (field.message_type is not None and field.message_type.full_name not in _DATA_TYPES
                 and not field.message_type.GetOptions().map_entry)
        # A map is an object; a repeated Value or ListValue holds data, whose
        # nulls and lists are items like any other.
        listed = _repeated(field) and (field.message_type is None or typed)
        if value is None:
            continue  # The field unset.
        if listed and not isinstance(value, list):
            raise ValueError(f"{path}{key}: {key!r} is a list: write its items in [ ]")
        items = value if listed else [value]
        for i, item in enumerate(items):
            at = f"{path}{key}[{i}]" if listed else f"{path}{key}"
            if listed and isinstance(item, list):
                raise ValueError(f"{at}: a list inside the list {key!r}, whose items are "
                                 f"{'objects' if typed else 'single values'}")
            if listed and item is None:
                raise ValueError(f"{at}: null in the list {key!r}")
            if typed and isinstance(item, dict):
                _check_fields(item, field.message_type, at + ".")


def _path_to(doc, target, path=""):
    """The path of object `target` in `doc` ("ops[0]", "" for `doc`
    itself), as _check_fields writes paths, or None."""
    if doc is target:
        return path
    items = (doc.items() if isinstance(doc, dict)
             else ((f"[{i}]", v) for i, v in enumerate(doc)) if isinstance(doc, list) else ())
    for key, value in items:
        at = (path + key) if isinstance(doc, list) else (f"{path}.{key}" if path else key)
        found = _path_to(value, target, at)
        if found is not None:
            return found
    return None


def _json_depth(text):
    """How deeply `text` nests arrays and objects (brackets in strings do
    not count); malformed text is json.loads' to word."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = builtins.max(deepest, depth)  # This module's max is the reduction.
        elif ch in "]}":
            depth -= 1
    return deepest


# ---------------------------------------------------------------------------
# Primitives.

def _bools(op, *args):
    """args, where each tensor of known dtype is bool (TypeError otherwise)."""
    for a in args:
        if isinstance(a, Tensor) and a.dtype is not None and a.dtype != pb.DTYPE_BOOL:
            raise TypeError(f"{op} takes bool tensors (logical); on {pb.DType.Name(a.dtype)} PyTorch's {op} is "
                            "bitwise, which kfuse does not have")
    return args


def _chain_of(args):
    chains = {id(a.chain): a.chain for a in args if isinstance(a, Tensor)}
    if len(chains) != 1:
        raise ValueError("an op needs at least one tensor, and all of one chain"
                         if chains else "an op needs at least one tensor")
    return next(iter(chains.values()))


def _as_tensor(chain, x):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return chain.constant(x)
    raise TypeError(f"expected a kfuse Tensor or a Python number; got {type(x).__name__}")


def _ref(t):
    kind, i = t.ref
    return pb.Ref(**{kind: i})


def _promote_args(args):
    """_promote over tensors and Python numbers (a bool is sent typed)."""
    dtypes = [a.dtype if isinstance(a, Tensor) else pb.DTYPE_BOOL for a in args
              if isinstance(a, (Tensor, bool))]
    return _promote(dtypes, any(isinstance(a, float) for a in args),
                    any(isinstance(a, int) and not isinstance(a, bool) for a in args))


def _emit(kind, args, out_dtype=None, out_shape=None, **attrs):
    chain = _chain_of(args)
    ts = [_as_tensor(chain, a) for a in args]
    op = pb.Op(kind=kind, args=[_ref(t) for t in ts], **attrs)
    real = [t for t, a in zip(ts, args) if isinstance(a, Tensor)]
    dtype = out_dtype
    if dtype is None:
        dtype = _promote_args(args)
    if out_shape is None:
        out_shape = _broadcast([t.shape for t in real])
    return chain._append(op, dtype, out_shape)


def _unary(kind, float_result=True):
    def f(x):
        dt = x.dtype
        if float_result and dt is not None and dt not in _FLOATS:
            dt = pb.DTYPE_F32
        return _emit(kind, [x], out_dtype=dt)
    f.__name__ = pb.OpKind.Name(kind)[3:].lower()
    return f


neg = _unary(pb.OP_NEG, False)
abs = _unary(pb.OP_ABS, False)  # noqa: A001
exp = _unary(pb.OP_EXP)
exp2 = _unary(pb.OP_EXP2)
log = _unary(pb.OP_LOG)
log2 = _unary(pb.OP_LOG2)
sqrt = _unary(pb.OP_SQRT)
rsqrt = _unary(pb.OP_RSQRT)
reciprocal = _unary(pb.OP_RECIPROCAL)
sin = _unary(pb.OP_SIN)
cos = _unary(pb.OP_COS)
tanh = _unary(pb.OP_TANH)
sigmoid = _unary(pb.OP_SIGMOID)
relu = _unary(pb.OP_RELU, False)
silu = _unary(pb.OP_SILU)
softplus = _unary(pb.OP_SOFTPLUS)
square = _unary(pb.OP_SQUARE, False)
erf = _unary(pb.OP_ERF)
floor = _unary(pb.OP_FLOOR, False)
ceil = _unary(pb.OP_CEIL, False)


def logical_not(x):
    return _emit(pb.OP_LOGICAL_NOT, [x], out_dtype=pb.DTYPE_BOOL)


def gelu(x, approximate="none"):
    """GELU as torch.nn.functional.gelu: erf form, or approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh'; got {approximate!r}")
    return _emit(pb.OP_GELU_TANH if approximate == "tanh" else pb.OP_GELU_ERF, [x])


def add(a, b): return _emit(pb.OP_ADD, [a, b])
def sub(a, b): return _emit(pb.OP_SUB, [a, b])
def mul(a, b): return _emit(pb.OP_MUL, [a, b])


def div(a, b):
    t = _emit(pb.OP_DIV, [a, b])
    if t.dtype is not None and t.dtype not in _FLOATS:
        t.dtype = pb.DTYPE_F32  # True division, as PyTorch.
    return t


def maximum(a, b): return _emit(pb.OP_MAXIMUM, [a, b])
def minimum(a, b): return _emit(pb.OP_MINIMUM, [a, b])
def pow(a, b): return _emit(pb.OP_POW, [a, b])  # noqa: A001
def eq(a, b): return _emit(pb.OP_EQ, [a, b], out_dtype=pb.DTYPE_BOOL)
def ne(a, b): return _emit(pb.OP_NE, [a, b], out_dtype=pb.DTYPE_BOOL)
def lt(a, b): return _emit(pb.OP_LT, [a, b], out_dtype=pb.DTYPE_BOOL)
def le(a, b): return _emit(pb.OP_LE, [a, b], out_dtype=pb.DTYPE_BOOL)
def gt(a, b): return _emit(pb.OP_GT, [a, b], out_dtype=pb.DTYPE_BOOL)
def ge(a, b): return _emit(pb.OP_GE, [a, b], out_dtype=pb.DTYPE_BOOL)
def logical_and(a, b): return _emit(pb.OP_LOGICAL_AND, [a, b], out_dtype=pb.DTYPE_BOOL)
def logical_or(a, b): return _emit(pb.OP_LOGICAL_OR, [a, b], out_dtype=pb.DTYPE_BOOL)


def where(cond, a, b):
    chain = _chain_of([cond, a, b])
    ts = [_as_tensor(chain, x) for x in (cond, a, b)]
    dt = _promote_args([a, b])
    shape = _broadcast([t.shape for t, x in zip(ts, (cond, a, b)) if isinstance(x, Tensor)])
    return _emit(pb.OP_WHERE, ts, out_dtype=dt, out_shape=shape)


def cast(x, dtype):
    dt = dtype_of(dtype)
    return _emit(pb.OP_CAST, [x], out_dtype=dt, out_shape=x.shape, dtype=dt)


def _axis(rank, a, what="axis"):
    """`a` as an axis of a tensor of `rank` (negative counts from the
    end): ValueError naming it where it is not one."""
    if isinstance(a, bool):
        raise TypeError(f"{what} must be an int, not bool")
    try:
        a = operator.index(a)  # numpy's integers too.
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(a).__name__}") from None
    if not -rank <= a < rank:
        raise ValueError(f"{what} {a} is out of range for rank {rank}")
    return a % rank


def _axes(x, axis):
    axes = (axis,) if hasattr(axis, "__index__") else tuple(axis)
    if x.shape is None:
        for a in axes:
            if isinstance(a, bool) or not hasattr(a, "__index__"):
                raise TypeError(f"axis must be an int, not {type(a).__name__}")
        return tuple(operator.index(a) for a in axes), None
    r = len(x.shape)
    norm = {_axis(r, a) for a in axes}
    return tuple(operator.index(a) for a in axes), norm


def _reduce(kind):
    def f(x, axis=-1, keepdim=False):
        axes, norm = _axes(x, axis)
        shape = None
        if norm is not None:
            shape = tuple(1 if i in norm else d for i, d in enumerate(x.shape) if keepdim or i not in norm)
        dt = x.dtype
        if kind == pb.OP_REDUCE_MEAN and dt is not None and dt not in _FLOATS:
            dt = pb.DTYPE_F32
        elif kind == pb.OP_REDUCE_SUM and dt == pb.DTYPE_BOOL:
            dt = pb.DTYPE_I32  # A count, as kfused sums bools.
        return _emit(kind, [x], out_dtype=dt, out_shape=shape,
                     reduce=pb.ReduceAttrs(axes=list(axes), keepdim=keepdim))
    f.__name__ = pb.OpKind.Name(kind)[10:].lower()
    return f


sum = _reduce(pb.OP_REDUCE_SUM)  # noqa: A001
max = _reduce(pb.OP_REDUCE_MAX)  # noqa: A001
min = _reduce(pb.OP_REDUCE_MIN)  # noqa: A001
mean = _reduce(pb.OP_REDUCE_MEAN)


def permute(x, perm):
    perm = [p % x.rank for p in perm]
    if sorted(perm) != list(range(x.rank)):
        raise ValueError(f"{perm} is not a permutation of rank {x.rank}")
    return _emit(pb.OP_PERMUTE, [x], out_dtype=x.dtype, out_shape=tuple(x.shape[p] for p in perm),
                 permute=pb.PermuteAttrs(perm=perm))


def transpose(x, d0=-2, d1=-1):
    perm = list(range(x.rank))
    d0, d1 = _axis(x.rank, d0, "d0"), _axis(x.rank, d1, "d1")
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(x, perm)


def reshape(x, shape):
    return _shape_op(pb.OP_RESHAPE, x, shape)


def expand(x, shape):
    return _shape_op(pb.OP_EXPAND, x, shape)


def _shape_value(shape):
    return tuple(d.name if isinstance(d, Sym) else d for d in shape)


def _shape_op(kind, x, shape):
    op_shape = pb.ShapeAttrs(shape=[_dim_proto(d) for d in shape])
    return _emit(kind, [x], out_dtype=x.dtype, out_shape=_shape_value(shape), **{"shape": op_shape})


def slice(x, axis, start, stop, step=1):  # noqa: A001
    """x[start:stop:step] along `axis`; stop None is the end of the dim:
    sent as its size, or, where that is not known here, as the largest
    int64, which the server clamps to the dim as Python does."""
    shape = None
    a = _axis(len(x.shape), axis) if x.shape is not None else axis  # The op keeps `axis` as given.
    size = x.shape[a] if x.shape is not None else None
    if isinstance(size, int):
        shape = list(x.shape)
        shape[a] = len(range(*builtins.slice(start, stop, step).indices(size)))
        shape = tuple(shape)
    if stop is None:
        stop = size if isinstance(size, int) else (1 << 63) - 1
    return _emit(pb.OP_SLICE, [x], out_dtype=x.dtype, out_shape=shape,
                 slice=pb.SliceAttrs(axis=axis, start=start, stop=stop, step=step))


def concat(xs, axis=-1):
    xs = list(xs)
    if not xs:
        raise ValueError("concat needs at least one tensor")
    shape = None
    if all(isinstance(t, Tensor) and t.shape is not None for t in xs):
        ranks = {len(t.shape) for t in xs}
        if len(ranks) != 1:
            raise ValueError(f"concat's tensors must have one rank; got ranks {sorted(ranks)}")
        a = _axis(ranks.pop(), axis)  # The op keeps `axis` as given.
        shape = list(xs[0].shape)
        parts = [t.shape[a] for t in xs]
        shape[a] = builtins.sum(parts) if all(isinstance(p, int) for p in parts) else None
        shape = tuple(shape)
    return _emit(pb.OP_CONCAT, list(xs), out_shape=shape, axis=pb.AxisAttrs(axis=axis))


def matmul(a, b):
    """Matrix product of the last two dims, batch dims broadcast."""
    shape = None
    if a.shape is not None and b.shape is not None:
        if a.rank < 2 or b.rank < 2:
            raise ValueError("matmul needs rank >= 2 on both sides")
        batch = _broadcast([a.shape[:-2], b.shape[:-2]])
        shape = tuple(batch) + (a.shape[-2], b.shape[-1])
    return _emit(pb.OP_MATMUL, [a, b], out_shape=shape)


# ---------------------------------------------------------------------------
# Composites: expanded into primitives.

def _eps(what, eps):
    """eps as a float: ValueError naming it unless finite and >= 0 (the CLI's rule)."""
    e = float(eps)
    if not (math.isfinite(e) and e >= 0):
        raise ValueError(f"{what}: eps {eps!r} must be finite and >= 0")
    return e


def _scale(what, scale):
    """scale as a float: ValueError naming it unless finite (every output
    would be NaN or infinite)."""
    s = float(scale)
    if not math.isfinite(s):
        raise ValueError(f"{what}: scale {scale!r} must be finite")
    return s


def softmax(x, dim=-1, scale=None, mask=None, bias=None):
    """softmax(x*scale + bias, masked where `mask` is False) along `dim`,
    with the max subtracted first."""
    if scale is not None:
        x = x * _scale("softmax", scale)
    if bias is not None:
        x = x + bias
    if mask is not None:
        x = where(mask, x, -math.inf)
    m = max(x, dim, keepdim=True)
    e = exp(x - m)
    return e / sum(e, dim, keepdim=True)


def log_softmax(x, dim=-1):
    m = max(x, dim, keepdim=True)
    s = x - m
    return s - log(sum(exp(s), dim, keepdim=True))


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm over the last dim."""
    mu = mean(x, -1, keepdim=True)
    d = x - mu
    var = mean(square(d), -1, keepdim=True)
    y = d * rsqrt(var + _eps("layer_norm", eps))
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x, weight=None, eps=1e-6):
    y = x * rsqrt(mean(square(x), -1, keepdim=True) + _eps("rms_norm", eps))
    return y * weight if weight is not None else y


_LOSS_REDUCTIONS = ("none", "mean", "sum")


def _dtype_name(dt):
    return pb.DType.Name(dt).removeprefix("DTYPE_").lower()


def _check_target(what, x, target, probabilities):
    """ValueError naming `what`'s target unless it holds class labels (i32,
    i64) of x's shape without its last axis or, with `probabilities`,
    floats of x's shape: a bool target would be read as labels 0 and 1, and
    labels [N, 1] broadcast against the classes into an [N, N] pick, where
    torch refuses both."""
    labels = target.dtype is None or target.dtype in _INTS
    if not labels and not (probabilities and target.dtype in _FLOATS):
        kinds = "class labels (i32 or i64) or probabilities (a float dtype)" if probabilities else \
            "class labels (i32 or i64)"
        raise ValueError(f"{what}: target must hold {kinds}, not {_dtype_name(target.dtype)}")
    if x.shape is None or target.shape is None or target.dtype is None:
        return
    want = tuple(x.shape[:-1]) if labels else tuple(x.shape)
    if tuple(target.shape) != want:
        held = "class labels" if labels else "probabilities"
        raise ValueError(f"{what}: target of {held} must have shape {list(want)} (the input's"
                         f"{' without its last (class) axis' if labels else ''}); got {list(target.shape)}")


def _pick(x, target):
    """x's element at column `target` of each row (classes along the last
    axis): a sum of x where an iota along the rows equals the label."""
    label = target if target.dtype == pb.DTYPE_I32 else cast(target, "i32")
    column = reshape(label, list(label.shape) + [1])
    iota = x.chain.iota([x.shape[-1]], 0)
    return sum(where(iota == column, x, 0), -1), label


def _reduce_loss(loss, reduction, weight=None):
    """A per-row loss reduced as torch's losses do: summed in f32 (over the
    rows not ignored, `weight`, for a mean) and rounded to its dtype once."""
    if reduction not in _LOSS_REDUCTIONS:
        raise ValueError(f"reduction must be one of {_LOSS_REDUCTIONS}; got {reduction!r}")
    if reduction == "none":
        return loss
    axes = tuple(range(loss.rank))
    if not axes:  # One row: nothing to reduce.
        total = cast(loss, "f32")
        if reduction == "mean" and weight is not None:
            total = total / cast(weight, "f32")
    elif reduction == "sum":
        total = sum(cast(loss, "f32"), axes)
    elif weight is None:
        total = mean(cast(loss, "f32"), axes)
    else:
        total = sum(cast(loss, "f32"), axes) / sum(cast(weight, "f32"), axes)
    return cast(total, loss.dtype)


def cross_entropy(x, target, ignore_index=-100, reduction="mean"):
    """torch.nn.functional.cross_entropy with classes along x's last axis.
    An integer target (i32 or i64, x's shape without the last axis) holds
    class labels: per row logsumexp(x) - x[label], 0 where the label is
    ignore_index; "mean" divides by the rows not ignored (NaN if none). A
    float target of x's shape holds probabilities: -sum(log_softmax(x) *
    target) per row. A label outside [0, classes) picks nothing (the loss
    is logsumexp(x)) where torch raises."""
    _check_target("cross_entropy", x, target, probabilities=True)
    if target.dtype in _INTS:
        picked, label = _pick(x, target)
        m = max(x, -1, keepdim=True)
        lse = log(sum(exp(x - m), -1)) + max(x, -1)
        kept = label != ignore_index
        return _reduce_loss(where(kept, lse - picked, 0), reduction, kept)
    return _reduce_loss(-sum(log_softmax(x, -1) * target, -1), reduction)


def nll_loss(logp, target, ignore_index=-100, reduction="mean"):
    """torch.nn.functional.nll_loss of log-probabilities with classes along
    the last axis and integer labels (see cross_entropy)."""
    _check_target("nll_loss", logp, target, probabilities=False)
    picked, label = _pick(logp, target)
    kept = label != ignore_index
    return _reduce_loss(where(kept, -picked, 0), reduction, kept)


def add_rms_norm(x, residual, weight=None, eps=1e-6):
    """(x + residual, rms_norm(x + residual)): the residual stream and its norm."""
    s = x + residual
    return s, rms_norm(s, weight, eps)


_ACTIVATIONS = {
    None: lambda y: y, "none": lambda y: y, "relu": relu, "silu": silu, "gelu": gelu,
    "gelu_tanh": lambda y: gelu(y, "tanh"), "sigmoid": sigmoid, "tanh": tanh,
}


def linear(x, weight, bias=None, activation=None):
    """x @ weight.T + bias, then `activation` (relu, silu, gelu, gelu_tanh,
    sigmoid, tanh); weight is [out, in], as torch.nn.Linear's."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(str(k) for k in _ACTIVATIONS)}")
    if weight.shape is not None and len(weight.shape) != 2:
        raise ValueError(f"weight must be [out, in]; got shape {list(weight.shape)}")
    y = matmul(x, transpose(weight))
    if bias is not None:
        y = y + bias
    return _ACTIVATIONS[activation](y)


def attention(q, k, v, causal=False, scale=None, mask=None, bias=None, lengths=None,
              return_lse=False):
    """Scaled dot-product attention, as torch's SDPA, over q [..., H, Lq, D],
    k [..., Hkv, Lk, D] and v [..., Hkv, Lk, Dv] (f16 or bf16).

    scale defaults to 1/sqrt(D) (D must then be static). bias (q's dtype) is added to the
    scores; mask (bool, True where attention is allowed), the causal mask
    (key j <= query i, aligned at the start, as torch's is_causal) and
    lengths (i32, q's leading dims before the heads, e.g. [B]: keys at or
    past a sequence's length are masked;
    values past Lk act as Lk) combine. A row with every key masked (by
    them or by a -inf bias) gives zeros, as SDPA. Hkv must divide H (grouped-query attention: q heads
    h*G .. h*G+G-1 read kv head h). With return_lse, also the f32
    log-sum-exp of each row's scores, [..., H, Lq].

    The expansion, which kfused recognises and fuses into one kernel:
      s = matmul(q, transpose(k)) * scale [+ bias]
      s = where(allowed, s, -inf)             (any mask)
      m = max(s, -1, keepdim); e = exp(s - m); z = sum(e, -1, keepdim)
      p = e / z
      p = where(m == -inf, 0, p)              (mask, lengths or bias)
      out = matmul(p, v);  lse = cast(m + log(z), f32) reshaped to [..., H, Lq]
    with grouped queries computed over [..., Hkv, G, L, D] views (k, v and
    the masks gain a dim of 1 that the products broadcast)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.shape is None or t.rank < 3:
            raise ValueError(f"attention: {name} must have a known shape [..., heads, seq, dim]")
    if q.rank != k.rank or q.rank != v.rank:
        raise ValueError("attention: q, k and v must have the same rank")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: head dims differ: q {q.shape[-1]}, k {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k and v sequence lengths differ: {k.shape[-2]}, {v.shape[-2]}")
    if scale is None:
        d = q.shape[-1]
        if not isinstance(d, int) or d <= 0:
            raise ValueError("attention: the head dim is not static; pass scale=")
        scale = 1.0 / math.sqrt(d)
    scale = _scale("attention", scale)
    if mask is not None and mask.dtype not in (None, pb.DTYPE_BOOL):
        raise ValueError("attention: mask must be bool (True where attention is allowed); "
                         "pass an additive float mask as bias=")
    if bias is not None and bias.dtype not in (None, q.dtype):
        raise ValueError(f"attention: bias must have q's dtype ({_dtype_name(q.dtype)}): the fused kernel adds "
                         f"it as such (cast it); got {_dtype_name(bias.dtype)} (a bool mask goes in mask=)")
    if lengths is not None and lengths.dtype not in (None, pb.DTYPE_I32):
        # The fused kernel reads lengths as they are: an i64 input would need a
        # cast, which the attention kernel does not take (the chain would be
        # refused as a whole).
        raise ValueError(f"attention: lengths must be i32 (sequence lengths fit; cast an i64 tensor "
                         f"with .int()); got {_dtype_name(lengths.dtype)}")
    heads, kv_heads = q.shape[-3], k.shape[-3]
    if kv_heads != v.shape[-3]:
        raise ValueError(f"attention: k has {kv_heads} heads and v {v.shape[-3]}")
    groups = 1
    if heads != kv_heads:
        if not (isinstance(heads, int) and isinstance(kv_heads, int)) or kv_heads <= 0 \
                or heads % kv_heads:
            raise ValueError(f"attention: kv heads ({kv_heads}) must divide q heads ({heads})")
        groups = heads // kv_heads
    out_shape = tuple(q.shape[:-1]) + (v.shape[-1],)
    if groups > 1:
        lead = list(q.shape[:-3])
        q = reshape(q, lead + [kv_heads, groups] + list(q.shape[-2:]))
        k = reshape(k, lead + [kv_heads, 1] + list(k.shape[-2:]))
        v = reshape(v, lead + [kv_heads, 1] + list(v.shape[-2:]))

        def split_heads(t):  # [..., H or 1, Lq, Lk] -> [..., Hkv, G or 1, Lq, Lk]
            if t is None or t.rank < 3:
                return t
            h = t.shape[-3]
            mid = [kv_heads, groups] if h == heads else [1, 1] if h == 1 else None
            if mid is None:
                raise ValueError(f"attention: a mask or bias with {h} heads does not "
                                 f"broadcast to {heads}")
            return reshape(t, list(t.shape[:-3]) + mid + list(t.shape[-2:]))

        bias, mask = split_heads(bias), split_heads(mask)
    s = matmul(q, transpose(k)) * scale
    if bias is not None:
        s = s + bias
    chain = q.chain
    allowed = mask
    if causal or lengths is not None:
        if any(x is None for x in s.shape):
            raise ValueError("attention: causal/lengths need the score shape")
        shape = list(s.shape)
        col = chain.iota(shape, len(shape) - 1)
        if causal:
            c = col <= chain.iota(shape, len(shape) - 2)
            allowed = c if allowed is None else logical_and(allowed, c)
        if lengths is not None:
            lens = reshape(lengths, list(lengths.shape) + [1] * (len(shape) - lengths.rank))
            c = col < lens
            allowed = c if allowed is None else logical_and(allowed, c)
    if allowed is not None:
        s = where(allowed, s, -math.inf)
    m = max(s, -1, keepdim=True)
    e = exp(s - m)
    z = sum(e, -1, keepdim=True)
    p = e / z
    if mask is not None or lengths is not None or bias is not None:
        p = where(m == -math.inf, 0.0, p)
    out = matmul(p, v)
    if groups > 1:
        out = reshape(out, list(out_shape))
    if not return_lse:
        return out
    lse = cast(m + log(z), "f32")
    return out, reshape(lse, list(out_shape[:-1]))


__all__ = [
    "LIMITS", "MAX_PLAN_KERNELS",
    "Chain", "Tensor", "Sym", "dtype_of",
    "neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
    "tanh", "sigmoid", "relu", "silu", "softplus", "square", "erf", "floor", "ceil", "gelu",
    "logical_not", "add", "sub", "mul", "div", "maximum", "minimum", "pow", "eq", "ne", "lt",
    "le", "gt", "ge", "logical_and", "logical_or", "where", "cast",
    "sum", "max", "min", "mean", "permute", "transpose", "reshape", "expand", "slice",
    "concat", "matmul",
    "softmax", "log_softmax", "layer_norm", "rms_norm", "add_rms_norm", "linear", "attention",
    "cross_entropy", "nll_loss",
]
