"""A whole Python float against a real kfused: promoted as a float, as torch
promotes it (the builder and the server agree on the result's dtype)."""
import kfuse
from kfuse import pb


def test_an_int_tensor_times_a_whole_float_is_f32(client):
    for scalar, want in ((2.0, pb.DTYPE_F32), (2, pb.DTYPE_I32)):
        c = kfuse.Chain()
        y = c.output("y", c.input("x", "i32", [1024]) * scalar)
        plan = client.compile(c, mode="heuristic").plan
        assert plan.outputs[0].dtype == want == y.dtype, scalar


def test_a_python_bool_keeps_its_neighbours_dtype(client):
    # As torch: where(m, True, False) is bool, f16 + True is f16.
    c = kfuse.Chain()
    m = c.input("m", "bool", [1024])
    outs = [c.output("w", kfuse.where(m, True, False)), c.output("h", c.input("x", "f16", [1024]) + True),
            c.output("o", m + True)]
    plan = client.compile(c, mode="heuristic").plan
    assert [o.dtype for o in plan.outputs] == [o.dtype for o in outs] == [pb.DTYPE_BOOL, pb.DTYPE_F16,
                                                                          pb.DTYPE_BOOL]


def test_int64_arithmetic_types_as_torch(client):
    # i64 beside i32 and a Python int is i64; a float beside it is the float.
    c = kfuse.Chain()
    pos = c.input("pos", "i64", [1024])
    outs = [c.output("p", pos * 3 + c.input("off", "i32", [1024])),
            c.output("f", pos * c.input("x", "f16", [1024])), c.output("q", pos / 2),
            c.output("b", pos + 2**40), c.output("w", kfuse.where(pos > 0, pos, -2**40))]
    plan = client.compile(c, mode="heuristic").plan
    assert [o.dtype for o in plan.outputs] == [o.dtype for o in outs] == [pb.DTYPE_I64, pb.DTYPE_F16,
                                                                          pb.DTYPE_F32, pb.DTYPE_I64,
                                                                          pb.DTYPE_I64]
    # An int past i32 beside i64 is sent as any Python int, weak: kfused
    # computes it in i64 (held in f32, it would have been refused).
    big = [op for op in c.to_proto().ops if op.kind == pb.OP_CONSTANT and abs(op.value) == 2**40]
    assert len(big) == 2 and all(op.dtype == pb.DTYPE_UNSPECIFIED for op in big)
