"""The client against a real kfused on loopback (--no_gpu)."""
import socket
import warnings

import grpc
import pytest

import kfuse
from kfuse import pb
from conftest import example
from test_chain import BUILDERS


def _cli_chain(name):
    return kfuse.Chain.from_json(example(name))


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_and_cli_json_get_the_same_key(client, name):
    ours = client.compile(BUILDERS[name](), mode="heuristic")
    theirs = client.compile(_cli_chain(name), mode="heuristic")
    assert ours.plan.key == theirs.plan.key and ours.plan.key
    assert theirs.cache == pb.CACHE_OUTCOME_HIT
    assert ours.plan.kernels[0].cubin


def test_lookup_list_delete(client):
    chain = BUILDERS["relu_fma_f32.json"]()
    key = client.compile(chain).plan.key
    assert client.lookup(chain).plan.key == key
    assert any(k.key == key for k in client.list(prefix=key[:8]).kernels)
    assert client.delete([key]) == 2  # The kernel and the decision it was built from.
    assert client.lookup(chain) is None


def test_device_info_and_health(client):
    info = client.device_info()
    assert not info.has_gpu and info.reason
    assert client.health() == "SERVING"
    assert client.health("kfuse.v1.KernelService") == "SERVING"
    assert client.health("kfuse.v1.Tuning") == "NOT_SERVING"


def test_rejected_chain_raises_with_the_op(client):
    with pytest.raises(kfuse.KfuseError) as e:
        client.compile(_cli_chain("bad_broadcast.json"))
    assert e.value.code == "INVALID_ARGUMENT"
    assert e.value.op == 0 and e.value.kind == "add"
    assert "broadcast" in e.value.message


def test_builder_rejected_op_is_named(client):
    c = kfuse.Chain()
    x = c.input("x", "f32", [8])
    y = c.input("y", "f32", [3])
    c.output("o", kfuse.exp(x) + y)
    with pytest.raises(kfuse.KfuseError) as e:
        client.compile(c)
    assert e.value.code == "INVALID_ARGUMENT" and e.value.op == 1


def _composites():
    def softmax(c):
        x = c.input("x", "f32", [64, 1024])
        return kfuse.softmax(x, scale=0.5)

    def layer_norm(c):
        x = c.input("x", "bf16", [kfuse.Sym("M", hint=4096), 1024])
        return kfuse.layer_norm(x, c.input("w", "bf16", [1024]), c.input("b", "bf16", [1024]))

    def rms_norm(c):
        return kfuse.rms_norm(c.input("x", "f16", [128, 4096]), c.input("w", "f16", [4096]))

    def add_rms_norm(c):
        s, n = kfuse.add_rms_norm(c.input("x", "f32", [16, 256]), c.input("r", "f32", [16, 256]),
                                  c.input("w", "f32", [256]))
        c.output("s", s)
        return n

    def log_softmax(c):
        return kfuse.log_softmax(c.input("x", "f32", [8, 100]))

    def linear(c):
        return kfuse.linear(c.input("x", "bf16", [128, 256]), c.input("w", "bf16", [512, 256]),
                            c.input("b", "bf16", [512]), activation="gelu")

    def attention(c):
        q, k, v = (c.input(n, "bf16", [2, 4, 128, 64]) for n in "qkv")
        return kfuse.attention(q, k, v, causal=True)

    return {f.__name__: f for f in (softmax, layer_norm, rms_norm, add_rms_norm, log_softmax,
                                    linear, attention)}


COMPOSITES = _composites()


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites_are_accepted_or_unimplemented(client, name):
    c = kfuse.Chain()
    c.output("y", COMPOSITES[name](c))
    try:
        resp = client.compile(c, mode="heuristic")
    except kfuse.KfuseError as e:
        # A chain no generator covers yet answers UNIMPLEMENTED; anything
        # else (INVALID_ARGUMENT) is a builder bug.
        assert e.code == "UNIMPLEMENTED", e.message
        return
    assert resp.plan.kernels


@pytest.mark.parametrize("reduction, kernels", [("none", 1), ("mean", 2), ("sum", 2)])
@pytest.mark.parametrize("labels", ["i64", "i32"])
def test_cross_entropy_with_labels_is_planned(client, reduction, kernels, labels):
    # The label picks its logit through an iota along the row: the loss per
    # row is one row kernel; a reduction over the rows is a second kernel.
    c = kfuse.Chain()
    n = kfuse.Sym("N", hint=4096)
    x = c.input("logits", "bf16", [n, 50257])
    t = c.input("labels", labels, [n])
    c.output("loss", kfuse.cross_entropy(x, t, reduction=reduction))
    plan = client.compile(c, mode="heuristic").plan
    assert len(plan.kernels) == kernels
    assert plan.outputs[0].dtype == pb.DTYPE_BF16


def test_nll_loss_and_soft_targets_are_planned(client):
    c = kfuse.Chain()
    x = c.input("x", "f32", [256, 1000])
    c.output("nll", kfuse.nll_loss(kfuse.log_softmax(x), c.input("t", "i64", [256])))
    c.output("soft", kfuse.cross_entropy(x, c.input("p", "f32", [256, 1000]), reduction="none"))
    assert client.compile(c, mode="heuristic").plan.kernels


def test_i64_values_compute_sum_and_view_as_i64(client):
    c = kfuse.Chain()
    t = c.input("labels", "i64", [64])
    c.output("y", t + 1)
    assert client.compile(c, mode="heuristic").plan.outputs[0].dtype == pb.DTYPE_I64
    c = kfuse.Chain()
    m = c.input("mask", "bool", [8, 64])
    c.output("count", kfuse.sum(m))
    c.output("lengths", kfuse.sum(kfuse.cast(m, "i64")))
    c.output("last", kfuse.max(c.input("pos", "i64", [8, 64])))
    dtypes = [o.dtype for o in client.compile(c, mode="heuristic").plan.outputs]
    assert dtypes == [pb.DTYPE_I32, pb.DTYPE_I64, pb.DTYPE_I64]
    c = kfuse.Chain()
    c.output("pos", kfuse.reshape(c.input("pos", "i64", [64, 8]), [8, 64]) * 3)
    assert client.compile(c, mode="heuristic").plan.outputs[0].dtype == pb.DTYPE_I64
    c = kfuse.Chain()
    c.output("s", kfuse.mean(c.input("labels", "i64", [64])))
    with pytest.raises(kfuse.KfuseError) as e:
        client.compile(c)
    assert e.value.code == "INVALID_ARGUMENT" and "reduce_mean needs a float operand" in e.value.message


def test_element_wise_composites_compile(client):
    c = kfuse.Chain()
    x = c.input("x", "bf16", [kfuse.Sym("N", hint=1 << 20)])
    c.output("a", kfuse.gelu(x))
    c.output("b", kfuse.silu(x) * kfuse.gelu(x, approximate="tanh"))
    c.output("c", kfuse.where(x > 0, kfuse.maximum(x, 0.5), kfuse.cast(x, "f32")))
    resp = client.compile(c)
    assert len(resp.plan.outputs) == 3


def test_signed_plans_verify_with_the_pinned_key(kfused):
    pytest.importorskip("nacl", reason="PyNaCl is not installed")
    address, key = kfused
    with kfuse.Client(address, verify_key=key, on_unavailable="raise") as c:
        plan = c.compile(BUILDERS["gelu_bias_bf16.json"]()).plan
        assert len(plan.signature) == 64
        kfuse.signing.verify_plan(plan, key)
        plan.kernels[0].grid.x.constant = 1 << 30  # Tampered launch contract.
        with pytest.raises(kfuse.KfuseError, match="does not verify"):
            kfuse.signing.verify_plan(plan, key)
        # The private signing key pinned by mistake: named, its digits never echoed.
        from nacl.signing import SigningKey
        seed = SigningKey.generate()
        plan.signature = seed.sign(kfuse.signing.signing_payload(plan)).signature
        with pytest.raises(kfuse.KfuseError, match="private signing key, not its public key") as e:
            kfuse.signing.verify_plan(plan, bytes(seed).hex())
        assert bytes(seed).hex()[:8] not in e.value.message
    other = "11" * 32
    with kfuse.Client(address, verify_key=other, on_unavailable="raise") as c:
        with pytest.raises(kfuse.KfuseError) as e:
            c.compile(BUILDERS["relu_fma_f32.json"]())
        assert e.value.code == "PERMISSION_DENIED"


def test_a_message_that_does_not_parse_is_invalid_argument(kfused):
    # A client built from another kfuse.proto sends bytes the server cannot
    # parse: the answer names the method and the type, not UNIMPLEMENTED.
    with grpc.insecure_channel(kfused[0]) as channel:
        compile_raw = channel.unary_unary("/kfuse.v1.KernelService/Compile")
        with pytest.raises(grpc.RpcError) as e:
            compile_raw(b"\x0a\xff\xff\xff\xff\x0f\x01\x02", timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "kfuse.v1.CompileRequest" in e.value.details()


def test_server_reflection_lists_the_services(kfused):
    # grpcurl's `list`: ServerReflectionRequest{list_services: ""} on the
    # bidi stream, encoded by hand (field 7, an empty string).
    with grpc.insecure_channel(kfused[0]) as channel:
        info = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        call = info(iter([b"\x3a\x00"]), timeout=10)
        answers = list(call)
    assert call.code() == grpc.StatusCode.OK
    assert len(answers) == 1 and b"kfuse.v1.KernelService" in answers[0]


class _FakeCuda:
    """libcuda as ctypes would load it: cuDriverGetVersion writes `version`."""

    def __init__(self, version):
        self.version = version

    def cuDriverGetVersion(self, out):
        out._obj.value = self.version
        return 0


def test_requests_carry_the_installed_driver_version(monkeypatch):
    import kfuse.client as kc

    chain = BUILDERS["relu_fma_f32.json"]()
    for loaded, want in ((lambda name: _FakeCuda(13020), 13020), (None, 0)):
        def cdll(name, loaded=loaded):
            assert name == "libcuda.so.1"
            if loaded is None:
                raise OSError("libcuda.so.1: cannot open shared object file")
            return loaded(name)
        monkeypatch.setattr(kc.ctypes, "CDLL", cdll)
        kc.installed_driver_version.cache_clear()
        req = kfuse.Client.request(chain)
        assert req.env.driver_version == want
        assert req.env.client == kfuse.CLIENT_NAME
    # A caller's environment wins where it says more.
    monkeypatch.setattr(kc.ctypes, "CDLL", lambda name: _FakeCuda(13020))
    kc.installed_driver_version.cache_clear()
    req = kfuse.Client.request(chain, env=pb.ClientEnvironment(driver_version=12080))
    assert req.env.driver_version == 12080
    kc.installed_driver_version.cache_clear()


@pytest.mark.parametrize("target, arch_specific, want", [
    (0, False, (0, False)), (90, False, (90, False)), (90, True, (90, True)),
    ("sm_90", False, (90, False)), ("sm_90a", False, (90, True)), ("sm_120", True, (120, True)),
])
def test_a_target_is_a_compute_capability_or_an_architectures_name(target, arch_specific, want):
    req = kfuse.Client.request(BUILDERS["relu_fma_f32.json"](), target=target, arch_specific=arch_specific)
    assert (req.target.compute_capability, req.target.arch_specific) == want


@pytest.mark.parametrize("target", ["90", "sm90", "compute_90", "sm_90b", -1, 2**32, 9.0, True, None])
def test_another_target_is_a_value_error_naming_it(target):
    with pytest.raises(ValueError, match="target must be a compute capability"):
        kfuse.Client.request(BUILDERS["relu_fma_f32.json"](), target=target)


def _dead_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"  # Closed when we return: nothing listens.


def test_unreachable_server_falls_back_with_one_warning():
    c = kfuse.Client(_dead_address(), timeout=5)
    chain = BUILDERS["relu_fma_f32.json"]()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert c.compile(chain) is None
        assert c.compile(chain) is None
        assert c.tune(chain) is None
    assert [type(x.message) for x in w] == [kfuse.FallbackWarning]
    assert "unreachable" in str(w[0].message)


def test_unreachable_server_raises_when_configured():
    c = kfuse.Client(_dead_address(), timeout=5, on_unavailable="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(kfuse.ServerUnavailable) as e:
            c.compile(BUILDERS["relu_fma_f32.json"]())
    assert e.value.code == "UNAVAILABLE"
    with pytest.raises(kfuse.ServerUnavailable):
        kfuse.Client(_dead_address(), timeout=5).device_info()  # Admin calls always raise.


def test_a_server_that_never_answers_counts_as_unreachable():
    # Accepts connections and never answers: a hung or overloaded host.
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        address = "127.0.0.1:%d" % srv.getsockname()[1]
        chain = BUILDERS["relu_fma_f32.json"]()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert kfuse.Client(address, timeout=0.5).compile(chain) is None
        assert [type(x.message) for x in w] == [kfuse.FallbackWarning]
        assert "did not answer in time" in str(w[0].message)
        with pytest.raises(kfuse.ServerUnavailable) as e:
            kfuse.Client(address, timeout=0.5, on_unavailable="raise").compile(chain)
        assert e.value.code == "DEADLINE_EXCEEDED"


class _RpcError(grpc.RpcError):
    def __init__(self, code):
        self._code = code

    def code(self):
        return self._code

    def details(self):
        return self._code.name.lower()


class _TuneStub:
    """A KernelService stub whose Tune records its deadline and streams
    `messages`, then fails with `error` (a grpc.StatusCode) if given."""

    def __init__(self, messages, error=None):
        self.messages, self.error, self.timeouts = messages, error, []

    def Tune(self, req, timeout=None, metadata=None):  # noqa: N802 (gRPC's name)
        self.timeouts.append(timeout)

        def stream():
            yield from self.messages
            if self.error is not None:
                raise _RpcError(self.error)
        return stream()


def _done():
    return pb.TuneProgress(result=pb.CompileResponse(plan=pb.KernelPlan(key="k")))


def test_tune_deadline_covers_the_budget():
    c = kfuse.Client(_dead_address(), timeout=30)
    c._stub = _TuneStub([_done()])
    chain = BUILDERS["relu_fma_f32.json"]()
    assert c.tune(chain, mode="full", budget_seconds=600).plan.key == "k"
    c.tune(chain)
    c.tune(chain, budget_seconds=5, timeout=10)
    assert c._stub.timeouts == [630, 30, 15]


def test_tune_past_its_deadline_after_answering_raises():
    chain = BUILDERS["relu_fma_f32.json"]()
    c = kfuse.Client(_dead_address(), timeout=1)  # on_unavailable="eager"
    c._stub = _TuneStub([pb.TuneProgress(done=1, total=8)], grpc.StatusCode.DEADLINE_EXCEEDED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(kfuse.KfuseError, match="ran past the 1 s deadline") as e:
            c.tune(chain)
    assert e.value.code == "DEADLINE_EXCEEDED" and not isinstance(e.value, kfuse.ServerUnavailable)
    # No message before the deadline: no answer in time, as compile.
    c._stub = _TuneStub([], grpc.StatusCode.DEADLINE_EXCEEDED)
    with pytest.warns(kfuse.FallbackWarning, match="did not answer in time"):
        assert c.tune(chain) is None


def test_slice_to_the_end_is_accepted(client):
    c = kfuse.Chain()
    x = c.input("x", "f32", [8, 64])
    y = kfuse.slice(x, 1, 16, None)  # x[:, 16:]
    c.output("y", kfuse.relu(y))
    assert y.shape == (8, 48) and c.to_proto().ops[0].slice.stop == 64
    plan = client.compile(c, mode="heuristic").plan
    assert [d.size for d in plan.outputs[0].shape] == [8, 48]
    # The ops of a chain read back have no shapes: the stop is one the server clamps.
    c = kfuse.Chain()
    kfuse.relu(c.input("x", "f32", [8, 64]))
    back = kfuse.Chain.from_proto(c.to_proto())
    z = kfuse.slice(back.ops[0], 1, 8, None)
    assert z.shape is None and back.to_proto().ops[-1].slice.stop == (1 << 63) - 1
    back.output("z", z * 2)
    plan = client.compile(back, mode="heuristic").plan
    assert [d.size for d in plan.outputs[0].shape] == [8, 56]


def test_the_default_address_is_kfuse_server_as_for_the_cli(monkeypatch):
    monkeypatch.setenv("KFUSE_SERVER", "127.0.0.1:7499")
    assert kfuse.Client().address == "127.0.0.1:7499"
    assert kfuse.Client("127.0.0.1:7001").address == "127.0.0.1:7001"
    monkeypatch.delenv("KFUSE_SERVER")
    assert kfuse.Client().address == "127.0.0.1:7420"


@pytest.mark.parametrize("kwargs, error, message", [
    ({"timeout": float("inf")}, ValueError, "timeout must be a positive, finite"),
    ({"timeout": float("nan")}, ValueError, "timeout must be a positive, finite"),
    ({"timeout": -1}, ValueError, "timeout must be a positive, finite"),
    ({"timeout": "5"}, TypeError, "timeout must be a number"),
    ({"verify_key": ""}, ValueError, "verify_key must be 64 hex digits"),
    ({"verify_key": "ab" * 31}, ValueError, "verify_key must be 64 hex digits"),
    ({"verify_key": 7}, TypeError, "verify_key must be a str"),
    ({"token": "a\nb"}, ValueError, "token must be a non-empty str of printable ASCII"),
    ({"address": 5}, TypeError, "address must be a str"),
])
def test_bad_arguments_are_refused_by_the_constructor(kwargs, error, message):
    with pytest.raises(error, match=message):
        kfuse.Client(**kwargs)


@pytest.mark.parametrize("timeout, error", [
    (float("inf"), ValueError), (float("nan"), ValueError), (-1, ValueError), (1e-9 * 0, ValueError),
    ("5", TypeError),
])
def test_bad_per_call_timeouts_are_refused_as_the_constructor_does(timeout, error):
    # Passed on, each failed the call at once as "did not answer in time":
    # a silent None in eager mode.
    c = kfuse.Client(_dead_address(), timeout=5)
    chain = BUILDERS["relu_fma_f32.json"]()
    with pytest.raises(error, match="timeout must be"):
        c.compile(chain, timeout=timeout)
    with pytest.raises(error, match="timeout must be"):
        c.list(timeout=timeout)


def test_a_budget_out_of_range_is_not_added_to_the_tune_deadline():
    # The server refuses it naming policy.budget_seconds; added to the
    # deadline, inf or nan ended the call first.
    c = kfuse.Client(_dead_address(), timeout=30)
    c._stub = _TuneStub([_done()])
    chain = BUILDERS["relu_fma_f32.json"]()
    for budget in (float("inf"), float("nan"), -3.0):
        c.tune(chain, budget_seconds=budget)
    assert c._stub.timeouts == [30, 30, 30]


@pytest.mark.parametrize("message, op, kind", [
    ("op 3 (exp): args[0]: f32 and i32 do not promote", 3, "exp"),
    ("outputs[0].value: op 2 (add) is not an output", 2, "add"),
    # A name is client text, quoted: what it says is not the op.
    ('inputs[0] ("op 7 (exp)"): shape[0]: size must be positive', None, None),
    ('symbol "op 3 (matmul) \\" op 9 (x)": hint conflicts', None, None),
    ('inputs[1] ("x"): op 4 (relu) reads it', 4, "relu"),
    # Refused at the door, before typing: the wire op's index.
    ("ops[3].axis: reduce_sum takes no axis", 3, "reduce_sum"),
    ("ops[0].args[1]: op 2 is not an earlier op", 0, None),
    ("ops[12].kind: unknown op kind 999", 12, None),
])
def test_the_op_an_error_names_is_not_read_from_client_names(message, op, kind):
    e = kfuse.KfuseError("INVALID_ARGUMENT", message)
    assert (e.op, e.kind) == (op, kind)


def test_an_older_servers_unknown_kind_still_names_the_op():
    e = kfuse.KfuseError("INVALID_ARGUMENT", "op 4 (kind 99): unknown op kind")
    assert (e.op, e.kind) == (4, "kind 99")
