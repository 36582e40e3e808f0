"""The builder without a server: the JSON it writes, round trips, shapes."""
import json
import math

import pytest

import kfuse
from kfuse import pb
from conftest import example


def _canon(text):
    doc = json.loads(text)
    return kfuse.Chain.from_json(json.dumps(doc.get("chain", doc))).to_proto()


def build_relu_fma(symbolic):
    c = kfuse.Chain()
    dim = kfuse.Sym("N", hint=134217728) if symbolic else 1048576
    a, b, cc = (c.input(n, "f32", [dim]) for n in "abc")
    c.output("out", kfuse.relu(a * b + cc))
    return c


def build_gelu_bias():
    c = kfuse.Chain()
    x = c.input("x", "bf16", [kfuse.Sym("M", hint=32768), 4096])
    b = c.input("bias", "bf16", [4096])
    c.output("y", kfuse.gelu(x + b, approximate="tanh"))
    return c


def build_transcendental():
    c = kfuse.Chain()
    a = c.input("a", "bf16", [kfuse.Sym("N", hint=134217728)])
    b = c.input("b", "bf16", [kfuse.Sym("N", hint=134217728)])
    t = kfuse.exp(-(a * a)) * 0.5 + kfuse.sin(a)
    t = kfuse.tanh(t) * kfuse.sigmoid(b) - abs(a)
    c.output("out", t + 0.1 * b)
    return c


def build_silu():
    c = kfuse.Chain()
    c.output("y", kfuse.silu(c.input("x", "f16", [kfuse.Sym("N", hint=16777216)])))
    return c


BUILDERS = {
    "relu_fma_f32.json": lambda: build_relu_fma(False),
    "relu_fma_f32_symbolic.json": lambda: build_relu_fma(True),
    "gelu_bias_bf16.json": build_gelu_bias,
    "transcendental_10op_bf16.json": build_transcendental,
    "compile_request_sm90.json": build_silu,
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_writes_the_examples(name):
    assert BUILDERS[name]().to_proto() == _canon(example(name))


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_json_round_trip(name):
    c = BUILDERS[name]()
    again = kfuse.Chain.from_json(c.to_json())
    assert again.to_proto() == c.to_proto()
    assert json.loads(again.to_json()) == json.loads(c.to_json())


def test_json_uses_the_cli_format():
    doc = json.loads(build_relu_fma(False).to_json())
    assert doc["inputs"][0]["shape"] == [{"size": "1048576"}]
    assert doc["ops"][0] == {"kind": "OP_MUL", "args": [{"input": 0}, {"input": 1}]}


def test_from_json_accepts_a_compile_request():
    c = kfuse.Chain.from_json(example("compile_request_sm90.json"))
    assert c.to_proto().ops[0].kind == pb.OP_SILU
    assert c.inputs[0].shape == ("N",)


def test_scalars_are_weak_constants_and_operand_order_is_kept():
    c = kfuse.Chain()
    x = c.input("x", "f16", [4])
    y = 2.0 - x
    ops = c.to_proto().ops
    assert ops[0].kind == pb.OP_CONSTANT and ops[0].value == 2.0 and ops[0].dtype == 0
    assert ops[1].kind == pb.OP_SUB and ops[1].args[0].op == 0 and ops[1].args[1].input == 0
    assert y.dtype == pb.DTYPE_F16


def test_a_whole_python_float_is_sent_as_a_weak_float():
    """Python's 2 and 2.0 are one double on the wire: weak_float says which,
    so the server promotes i32 * 2.0 to f32 as torch does."""
    c = kfuse.Chain()
    x = c.input("x", "i32", [4])
    y = x * 2.0
    z = x * 2
    w = x * 0.5
    ops = c.to_proto().ops
    assert [(o.value, o.weak_float) for o in ops if o.kind == pb.OP_CONSTANT] == [
        (2.0, True), (2.0, False), (0.5, False)]
    assert y.dtype == pb.DTYPE_F32 and z.dtype == pb.DTYPE_I32 and w.dtype == pb.DTYPE_F32


def test_comparisons_and_where():
    c = kfuse.Chain()
    x = c.input("x", "f32", [8])
    m = (x > 0) & ~(x == 1.0)
    assert m.dtype == pb.DTYPE_BOOL
    y = kfuse.where(m, x, 0.0)
    kinds = [o.kind for o in c.to_proto().ops]
    assert kinds == [pb.OP_CONSTANT, pb.OP_GT, pb.OP_CONSTANT, pb.OP_EQ, pb.OP_LOGICAL_NOT,
                     pb.OP_LOGICAL_AND, pb.OP_CONSTANT, pb.OP_WHERE]
    assert y.dtype == pb.DTYPE_F32 and y.shape == (8,)


def test_cast_sets_the_op_dtype():
    c = kfuse.Chain()
    y = kfuse.cast(c.input("x", "f32", [8]), "bf16")
    assert c.to_proto().ops[0].dtype == pb.DTYPE_BF16 and y.dtype == pb.DTYPE_BF16


def test_reductions_shapes_and_attrs():
    c = kfuse.Chain()
    x = c.input("x", "f32", ["M", 1024])
    s = kfuse.sum(x, axis=-1, keepdim=True)
    m = x.mean(axis=0)
    assert s.shape == ("M", 1) and m.shape == (1024,)
    op = c.to_proto().ops[0]
    assert op.kind == pb.OP_REDUCE_SUM and list(op.reduce.axes) == [-1] and op.reduce.keepdim


def test_softmax_expands_to_primitives():
    c = kfuse.Chain()
    c.output("y", kfuse.softmax(c.input("x", "f32", [32, 1024])))
    kinds = [o.kind for o in c.to_proto().ops]
    assert kinds == [pb.OP_REDUCE_MAX, pb.OP_SUB, pb.OP_EXP, pb.OP_REDUCE_SUM, pb.OP_DIV]


def test_attention_shapes_and_mask():
    c = kfuse.Chain()
    q = c.input("q", "bf16", [2, 8, 128, 64])
    k = c.input("k", "bf16", [2, 8, 128, 64])
    v = c.input("v", "bf16", [2, 8, 128, 64])
    lens = c.input("lens", "i32", [2, 8])
    o = kfuse.attention(q, k, v, causal=True, lengths=lens)
    assert o.shape == (2, 8, 128, 64)
    ops = c.to_proto().ops
    kinds = [x.kind for x in ops]
    assert kinds[:2] == [pb.OP_PERMUTE, pb.OP_MATMUL] and kinds[-1] == pb.OP_MATMUL
    assert kinds.count(pb.OP_IOTA) == 2 and pb.OP_WHERE in kinds
    consts = [x.value for x in ops if x.kind == pb.OP_CONSTANT]
    assert 1 / math.sqrt(64) in consts and -math.inf in consts


def test_attention_refuses_side_inputs_of_other_dtypes_naming_them():
    c = kfuse.Chain()
    q = c.input("q", "bf16", [2, 8, 128, 64])
    for name, kw, msg in (
            ("llens", {"lengths": "i64"}, r"lengths must be i32 \(sequence lengths fit; cast an i64 tensor "
                                          r"with \.int\(\)\); got i64"),
            ("flens", {"lengths": "f32"}, r"lengths must be i32 .*; got f32"),
            ("fbias", {"bias": "f32"}, r"bias must have q's dtype \(bf16\): the fused kernel adds it as such \(cast it\); got f32"),
            ("bbias", {"bias": "bool"}, r"got bool \(a bool mask goes in mask=\)"),
            ("fmask", {"mask": "bf16"}, r"mask must be bool")):
        (arg, dt), = kw.items()
        with pytest.raises(ValueError, match=msg):
            kfuse.attention(q, q, q, **{arg: c.input(name, dt, [2, 1, 128, 128])})


def test_attention_needs_a_static_head_dim_or_scale():
    c = kfuse.Chain()
    q = c.input("q", "bf16", [2, 4, 16, "D"])
    with pytest.raises(ValueError, match="scale"):
        kfuse.attention(q, q, q)


def test_attention_grouped_queries_mask_and_lse():
    c = kfuse.Chain()
    q = c.input("q", "bf16", [2, 8, 128, 64])
    k = c.input("k", "bf16", [2, 2, 256, 64])
    v = c.input("v", "bf16", [2, 2, 256, 32])
    mask = c.input("mask", "bool", [2, 8, 128, 256])
    o, lse = kfuse.attention(q, k, v, mask=mask, return_lse=True)
    assert o.shape == (2, 8, 128, 32) and lse.shape == (2, 8, 128)
    ops = c.to_proto().ops
    kinds = [x.kind for x in ops]
    assert kinds.count(pb.OP_MATMUL) == 2 and kinds.count(pb.OP_WHERE) == 2
    reshaped = [tuple(d.size for d in x.shape.shape) for x in ops if x.kind == pb.OP_RESHAPE]
    assert (2, 2, 4, 128, 64) in reshaped and (2, 2, 1, 256, 64) in reshaped
    assert (2, 2, 4, 128, 256) in reshaped  # The mask's heads split as q's.


def test_attention_rejects_heads_that_do_not_divide():
    c = kfuse.Chain()
    q = c.input("q", "bf16", [1, 6, 16, 64])
    k = c.input("k", "bf16", [1, 4, 16, 64])
    with pytest.raises(ValueError, match="kv heads"):
        kfuse.attention(q, k, k)


def test_linear_and_add_rms_norm():
    c = kfuse.Chain()
    x = c.input("x", "bf16", ["M", 512])
    w = c.input("w", "bf16", [256, 512])
    b = c.input("b", "bf16", [256])
    y = kfuse.linear(x, w, b, activation="silu")
    assert y.shape == ("M", 256)
    r = c.input("r", "bf16", ["M", 256])
    s, n = kfuse.add_rms_norm(y, r, c.input("g", "bf16", [256]))
    assert s.shape == n.shape == ("M", 256)
    with pytest.raises(ValueError):
        kfuse.linear(x, w, activation="swish")


def test_cross_entropy_with_labels_picks_through_an_iota():
    c = kfuse.Chain()
    x = c.input("x", "bf16", ["N", 1000])
    t = c.input("t", "i64", ["N"])
    per_row = kfuse.cross_entropy(x, t, reduction="none")
    assert per_row.shape == ("N",) and per_row.dtype == pb.DTYPE_BF16
    kinds = [op.kind for op in c.to_proto().ops]
    assert pb.OP_IOTA in kinds and pb.OP_RESHAPE in kinds
    cast = next(op for op in c.to_proto().ops if op.kind == pb.OP_CAST)
    assert cast.dtype == pb.DTYPE_I32  # The i64 labels are read through a cast.
    mean = kfuse.cross_entropy(x, t)
    assert mean.shape == () and mean.dtype == pb.DTYPE_BF16
    assert kfuse.nll_loss(kfuse.log_softmax(x), t, reduction="sum").shape == ()
    soft = kfuse.cross_entropy(x, c.input("p", "bf16", ["N", 1000]), reduction="none")
    assert soft.shape == ("N",)
    with pytest.raises(ValueError, match="reduction"):
        kfuse.cross_entropy(x, t, reduction="avg")
    b = c.input("b", "bool", ["N"])
    with pytest.raises(ValueError, match=r"cross_entropy: target must hold class labels \(i32 or i64\) or "
                                         r"probabilities \(a float dtype\), not bool"):
        kfuse.cross_entropy(x, b)
    with pytest.raises(ValueError, match=r"nll_loss: target must hold class labels \(i32 or i64\), not f32"):
        kfuse.nll_loss(x, c.input("pf", "f32", ["N"]))
    # Labels [N, 1] would broadcast against the classes into an [N, N] pick.
    with pytest.raises(ValueError, match=r"nll_loss: target of class labels must have shape \['N'\] "
                                         r"\(the input's without its last \(class\) axis\); got \['N', 1\]"):
        kfuse.nll_loss(x, c.input("t1", "i32", ["N", 1]))
    with pytest.raises(ValueError, match=r"cross_entropy: target of probabilities must have shape \['N', 1000\]"):
        kfuse.cross_entropy(x, c.input("p1", "f32", ["N", 1]))


def test_tensors_of_two_chains_do_not_mix():
    a = kfuse.Chain().input("a", "f32", [4])
    b = kfuse.Chain().input("b", "f32", [4])
    with pytest.raises(ValueError):
        a + b


def test_bad_dims_and_dtypes():
    c = kfuse.Chain()
    with pytest.raises(ValueError):
        c.input("x", "f8", [4])
    with pytest.raises(ValueError):
        c.input("x", "f32", [-1])


def _x(shape=(4, 8), dtype="f32"):
    c = kfuse.Chain()
    return c, c.input("x", dtype, list(shape))


@pytest.mark.parametrize("build, error, message", [
    (lambda c, x: kfuse.transpose(c.input("v", "f32", [8])), ValueError, "d0 -2 is out of range for rank 1"),
    (lambda c, x: kfuse.transpose(c.input("s", "f32", [])), ValueError, "out of range for rank 0"),
    (lambda c, x: kfuse.concat([]), ValueError, "concat needs at least one tensor"),
    (lambda c, x: kfuse.concat([x, x], axis=5), ValueError, "axis 5 is out of range for rank 2"),
    (lambda c, x: kfuse.concat([x, c.input("v", "f32", [8])]), ValueError, "one rank; got ranks \\[1, 2\\]"),
    (lambda c, x: kfuse.slice(x, 5, 0, 2), ValueError, "axis 5 is out of range for rank 2"),
    (lambda c, x: kfuse.linear(x, c.input("w", "f32", [8])), ValueError, "weight must be \\[out, in\\]"),
    (lambda c, x: kfuse.sum(x, "a"), TypeError, "axis must be an int"),
    (lambda c, x: c.iota([4, 8], 100), ValueError, "axis 100 is out of range for rank 2"),
    # PyTorch's & | ~ on integers are bitwise; kfuse's are logical.
    (lambda c, x: c.input("i", "i32", [4]) & c.input("j", "i32", [4]), TypeError, "& takes bool tensors"),
    (lambda c, x: ~c.input("i", "i32", [4]), TypeError, "~ takes bool tensors"),
    (lambda c, x: True | c.input("i", "i32", [4]), TypeError, "\\| takes bool tensors"),
])
def test_builder_mistakes_are_named_not_index_errors(build, error, message):
    c, x = _x()
    with pytest.raises(error, match=message):
        build(c, x)


def test_bool_logic_and_negative_axes_build_as_before():
    c, x = _x()
    m = c.input("m", "bool", [4, 8])
    assert (m & (x > 0)).dtype == pb.DTYPE_BOOL
    assert (~m | m).dtype == pb.DTYPE_BOOL
    y = kfuse.concat([x, x], axis=-1)
    assert y.shape == (4, 16)
    assert y.chain.to_proto().ops[-1].axis.axis == -1  # Sent as given.
    assert kfuse.slice(x, -1, 2, None).shape == (4, 6)
    assert c.iota([4, 8], -1).chain.to_proto().ops[-1].axis.axis == 1


@pytest.mark.parametrize("text, message", [
    ("[]", "not list"), ('"x"', "not str"), ("null", "not NoneType"), ("1", "not int"),
    ("[" * 5000 + "]" * 5000, "nests too deeply"), ("[" * 101 + "]" * 101, "more than 100 levels"),
    # A repeated key, as the CLI refuses it (json.loads would keep the last).
    ('{"inputs": [], "outputs": [], "outputs": []}', "^the key 'outputs' again"),
    ('{"ops": [{"kind": "OP_RELU", "kind": "OP_EXP"}]}', r"^ops\[0\]: the key 'kind' again"),
    ('{"chain": {"ops": [{"kind": "OP_RELU"}, {"reduce": {"axes": [1], "axes": [2]}}]}}',
     r"^chain.ops\[1\].reduce: the key 'axes' again in one object of the chain's JSON"),
    # A field by both its names, and a list in a field's list, as the CLI.
    ('{"ops": [{"kind": "OP_CONSTANT", "weak_float": true, "weakFloat": false}]}',
     r"ops\[0\].weakFloat: the field 'weak_float' again in one object of the chain's JSON, as 'weak_float'"),
    ('{"chain": {"ops": [{"kind": "OP_REDUCE_SUM", "reduce": {"axes": [1, [2]]}}]}}',
     r"chain.ops\[0\].reduce.axes\[1\]: a list inside the list 'axes', whose items are single values"),
    ('{"inputs": [{"shape": [[{"size": 4}]]}]}', r"inputs\[0\].shape\[0\]: a list inside the list 'shape', whose items are objects"),
    ('{"ops": [{"kind": "OP_REDUCE_SUM", "reduce": {"axes": [null]}}]}', r"ops\[0\].reduce.axes\[0\]: null in the list 'axes'"),
    ('{"inputs": {"name": "x"}}', r"inputs: 'inputs' is a list: write its items in \[ \]"),
])
def test_from_json_wants_an_object(text, message):
    with pytest.raises(ValueError, match=message):
        kfuse.Chain.from_json(text)


def test_a_null_field_is_unset():
    c = kfuse.Chain.from_json('{"inputs": null, "ops": [{"kind": "OP_RELU", "reduce": null}], "outputs": null}')
    assert len(c.to_proto().ops) == 1 and not c.to_proto().ops[0].HasField("reduce")


def test_brackets_in_names_do_not_count_as_nesting():
    name = "[{" * 300 + '\\"'
    text = ('{"inputs": [{"name": ' + __import__("json").dumps(name)
            + ', "dtype": "DTYPE_F32", "shape": [{"size": 4}]}]}')
    c = kfuse.Chain.from_json(text)
    assert c.to_proto().inputs[0].name == name
    assert kfuse.Chain.from_json(text.encode()).to_proto().inputs[0].name == name  # Bytes, as a file read them.


def test_axes_may_be_numpy_style_integers():
    class Index:  # What numpy's integers are to Python: __index__.
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    c, x = _x()
    assert kfuse.transpose(x, Index(0), Index(1)).shape == (8, 4)
    assert kfuse.concat([x, x], axis=Index(0)).shape == (8, 8)
    assert kfuse.slice(x, Index(1), 0, 2).shape == (4, 2)
    assert kfuse.sum(x, Index(1)).shape == (4,)


def test_size_refusal_names_what_kfused_would_refuse():
    c = kfuse.Chain()
    xs = [c.input(f"x{i}", "f32", [4]) for i in range(64)]
    y = xs[0]
    for x in xs[1:]:
        y = y + x
    c.output("y", y)
    assert c.size_refusal() is None
    c.input("x64", "f32", [4])
    assert c.size_refusal() == "65 inputs, more than kfused takes in one chain (64)"
    m = kfuse.Chain()
    a = m.input("a", "bf16", [16, 16])
    for _ in range(kfuse.MAX_PLAN_KERNELS):
        a = a @ a
    m.output("a", a)
    assert m.size_refusal() is None  # 128 kernels: kfused builds it.
    m.output("b", a @ a)
    assert m.size_refusal() == "129 matrix products, each a kernel of its own: more than a plan holds (128 kernels)"
    o = kfuse.Chain()
    v = o.input("v", "f32", [4])
    for _ in range(kfuse.LIMITS["ops"] + 1):
        v = -v
    assert o.size_refusal() == "513 ops, more than kfused takes in one chain (512)"


def test_bool_dtypes_follow_kfused():
    # What kfused infers (a weak int arrives as an integer, a Python bool as a
    # typed bool, bools sum to a count).
    c = kfuse.Chain()
    m = c.input("m", "bool", [4])
    assert kfuse.sum(m).dtype == pb.DTYPE_I32
    assert (m + 2).dtype == pb.DTYPE_I32 and (m + True).dtype == pb.DTYPE_BOOL
    assert kfuse.where(m, True, False).dtype == pb.DTYPE_BOOL
    assert kfuse.where(m, True, 2).dtype == pb.DTYPE_I32
    assert (c.input("h", "f16", [4]) + True).dtype == pb.DTYPE_F16
    assert (c.input("i", "i32", [4]) * False).dtype == pb.DTYPE_I32
    true = [op for op in c.to_proto().ops if op.kind == pb.OP_CONSTANT and op.value == 1.0]
    assert true and all(op.dtype == pb.DTYPE_BOOL for op in true)
    assert kfuse.where(m, m, 0).dtype == pb.DTYPE_I32
    assert kfuse.where(m, 1, 0).dtype == pb.DTYPE_I32
    assert kfuse.where(m, 1.0, 0).dtype == pb.DTYPE_F32
    assert (m & m).dtype == pb.DTYPE_BOOL and kfuse.max(m).dtype == pb.DTYPE_BOOL


@pytest.mark.parametrize("build,msg", [
    (lambda x: kfuse.rms_norm(x, eps=float("nan")), r"rms_norm: eps nan must be finite and >= 0"),
    (lambda x: kfuse.layer_norm(x, eps=-1), r"layer_norm: eps -1 must be finite and >= 0"),
    (lambda x: kfuse.softmax(x, scale=float("inf")), r"softmax: scale inf must be finite"),
    (lambda x: kfuse.attention(x, x, x, scale=float("nan")), r"attention: scale nan must be finite"),
])
def test_composites_refuse_what_the_cli_refuses(build, msg):
    x = kfuse.Chain().input("x", "bf16", [2, 4, 8, 16])
    with pytest.raises(ValueError, match=msg):
        build(x)
