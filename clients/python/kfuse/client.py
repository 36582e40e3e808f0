"""A client of kfused's gRPC API (kfuse.v1.KernelService and health).

    client = kfuse.Client("127.0.0.1:7420", timeout=30)
    resp = client.compile(chain)          # CompileResponse, or None (eager fallback)
    plan = resp.plan
    client.device_info().has_gpu

Errors: a refused chain raises KfuseError (code, message, op); a server that
cannot be reached (UNAVAILABLE) or does not answer within the deadline
(DEADLINE_EXCEEDED) either raises ServerUnavailable (on_unavailable="raise")
or, for compile/tune, warns once per Client with FallbackWarning and returns
None so the caller runs eagerly (on_unavailable="eager", the default).
Admin calls (list, delete, device_info) always raise.
"""
import ctypes
import functools
import os
import re
import threading
import uuid
import warnings

import grpc

from kfuse.chain import Chain
from kfuse.errors import FallbackWarning, KfuseError, ServerUnavailable, from_rpc_error
from kfuse.signing import public_key_bytes
from kfuse.v1 import kfuse_pb2 as pb
from kfuse.v1 import kfuse_pb2_grpc as pb_grpc

CLIENT_NAME = "kfuse-python/0.1"
_MODES = {None: pb.TuningPolicy.MODE_UNSPECIFIED, "heuristic": pb.TuningPolicy.MODE_HEURISTIC,
          "quick": pb.TuningPolicy.MODE_QUICK, "full": pb.TuningPolicy.MODE_FULL}


@functools.lru_cache(maxsize=None)
def installed_driver_version():
    """cuDriverGetVersion() of the installed CUDA driver (13000 for 13.0), or 0
    where none is installed. Loads libcuda.so.1 (once a process) but needs
    no GPU and no cuInit; sent with each compile as
    ClientEnvironment.driver_version (informational, in no key)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return version.value
    except (OSError, AttributeError):
        pass
    return 0


def _health_request(service):
    name = service.encode()
    if len(name) > 127:
        raise ValueError("health service name too long")
    return b"\x0a" + bytes([len(name)]) + name if name else b""


def _health_status(data):
    # HealthCheckResponse{status = 1 (enum)}: tag 0x08, one varint byte.
    if len(data) >= 2 and data[0] == 0x08:
        return {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}.get(data[1], "UNKNOWN")
    return "UNKNOWN"


def _check_timeout(timeout):
    """A deadline of inf, nan, 0 or less fails every call at once as "did not
    answer in time", which eager mode turns into a silent None: refused."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if not (0 < timeout <= 86400 * 365):
        raise ValueError(f"timeout must be a positive, finite number of seconds, not {timeout!r}")


def _target(target, arch_specific):
    """The Target for `target`: a compute capability as major*10+minor (90;
    0, the server's GPU) or an architecture's name ("sm_90", or "sm_90a",
    which is arch_specific)."""
    if isinstance(target, str):
        m = re.fullmatch(r"sm_(\d{1,4})(a?)", target)
        if m:
            return pb.Target(compute_capability=int(m.group(1)), arch_specific=arch_specific or bool(m.group(2)))
    elif isinstance(target, int) and not isinstance(target, bool) and 0 <= target < 2**32:
        return pb.Target(compute_capability=target, arch_specific=arch_specific)
    raise ValueError(f"target must be a compute capability (90; 0: the server's GPU) or an architecture "
                     f"('sm_90', 'sm_90a'), not {target!r}")


class Client:
    """One channel to kfused; thread safe (gRPC channels are).

    address: "host:port" or "unix:/path"; default $KFUSE_SERVER, as for the
    CLI, else 127.0.0.1:7420. timeout: default deadline in
    seconds per call (tune adds its budget). tls / root_certs / cert_chain /
    private_key: TLS and mutual TLS (PEM bytes). token: bearer token sent as `authorization`.
    verify_key: 64 hex digits; plans that do not verify are refused
    (PERMISSION_DENIED) before they are returned. on_unavailable: "eager"
    or "raise"."""

    def __init__(self, address=None, *, timeout=30.0, tls=False, root_certs=None,
                 cert_chain=None, private_key=None, token=None, verify_key=None,
                 on_unavailable="eager", options=None):
        if on_unavailable not in ("eager", "raise"):
            raise ValueError("on_unavailable must be 'eager' or 'raise'")
        address = address or os.environ.get("KFUSE_SERVER") or "127.0.0.1:7420"
        # Checked here, not at the first call: a timeout of inf or 0 fails
        # every call as "did not answer in time", which eager mode turns into
        # a silent None; an empty verify_key would turn verification off.
        if not isinstance(address, str):
            raise TypeError(f"address must be a str such as '127.0.0.1:7420', not {type(address).__name__}")
        _check_timeout(timeout)
        if token is not None and (not isinstance(token, str) or not token or not token.isascii()
                                  or not token.isprintable()):
            raise ValueError("token must be a non-empty str of printable ASCII (it travels as a header)")
        if verify_key is not None:
            if not isinstance(verify_key, str):
                raise TypeError(f"verify_key must be a str of 64 hex digits, not {type(verify_key).__name__}")
            try:
                public_key_bytes(verify_key)
            except ValueError:
                raise ValueError("verify_key must be 64 hex digits (Ed25519, as kfused "
                                 "--print_public_key prints)") from None
        opts = [("grpc.max_receive_message_length", 256 << 20)] + list(options or [])
        if tls or root_certs or cert_chain:
            creds = grpc.ssl_channel_credentials(root_certs, private_key, cert_chain)
            self._channel = grpc.secure_channel(address, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(address, options=opts)
        self.address = address
        self.timeout = timeout
        self.on_unavailable = on_unavailable
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._verify_key = verify_key
        self._stub = pb_grpc.KernelServiceStub(self._channel)
        self._health = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=None, response_deserializer=None)
        self._warn_lock = threading.Lock()
        self._warned = False

    @property
    def verify_key(self):
        """The pinned public key (hex), or None."""
        return self._verify_key

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Calls.
    def compile(self, chain, *, target=0, arch_specific=False, mode=None, budget_seconds=0.0,
                background=False, force=False, include_source=False, timeout=None, env=None):
        """Compile (and tune, as `mode` says) a chain: a CompileResponse, or
        None when the server is unreachable and on_unavailable is "eager".
        No answer within `timeout` counts as unreachable: a compile that
        cannot wait for tuning is answered with the heuristic plan at once,
        tuning going on in the background (docs/api.md), so only a server
        that does not answer hits the deadline."""
        req = self.request(chain, target=target, arch_specific=arch_specific, mode=mode,
                           budget_seconds=budget_seconds, background=background, force=force,
                           include_source=include_source, env=env)
        resp = self._call(self._stub.Compile, req, timeout, fallback=True)
        if resp is not None:
            self._verify(resp.plan)
        return resp

    def tune(self, chain, *, on_progress=None, timeout=None, mode="quick", **kw):
        """As compile, streaming progress: on_progress(TuneProgress) per
        message; returns the final CompileResponse (or None, as compile).
        The deadline is `timeout` plus the request's budget_seconds, as the
        C++ client gives it: Tune has no early heuristic answer, and a tune
        cut off by its deadline is dropped. DEADLINE_EXCEEDED before any
        message counts as unreachable; after one, the server is there and
        the tune ran long, which raises KfuseError whatever on_unavailable
        says."""
        req = self.request(chain, mode=mode, **kw)
        deadline = self._timeout(timeout)
        # A budget out of range (inf, nan) is the server's to refuse, naming
        # the field; added to the deadline it would end the call first.
        if 0 < req.policy.budget_seconds <= 86400:
            deadline += req.policy.budget_seconds
        answered = False
        try:
            stream = self._stub.Tune(req, timeout=deadline, metadata=self._metadata)
            result = None
            for msg in stream:
                answered = True
                if on_progress is not None:
                    on_progress(msg)
                if msg.HasField("result"):
                    result = msg.result
        except grpc.RpcError as e:
            if answered and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise KfuseError("DEADLINE_EXCEEDED", f"tuning ran past the {deadline:g} s "
                                 "deadline (nothing is stored): pass a longer timeout") from None
            return self._failed(e, fallback=True)
        if result is None:
            raise KfuseError("INTERNAL", "Tune stream ended without a result")
        self._verify(result.plan)
        return result

    def lookup(self, chain, *, target=0, arch_specific=False, timeout=None):
        """The store only: a CompileResponse, or None on a miss."""
        req = self.request(chain, target=target, arch_specific=arch_specific)
        try:
            resp = self._stub.Lookup(req, timeout=self._timeout(timeout), metadata=self._metadata)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return None
            return self._failed(e, fallback=False)
        self._verify(resp.plan)
        return resp

    def list(self, prefix="", limit=0, timeout=None):
        return self._call(self._stub.ListKernels,
                          pb.ListKernelsRequest(key_prefix=prefix, limit=limit), timeout)

    def delete(self, keys=(), all=False, timeout=None):  # noqa: A002 (proto field)
        """Deletes the stored kernels under `keys` (whole keys), each with the
        tuning decision it was built from, or every entry with `all`; returns
        how many store entries went. Exactly one of the two must be given
        (KfuseError INVALID_ARGUMENT otherwise)."""
        return self._call(self._stub.DeleteKernels,
                          pb.DeleteKernelsRequest(keys=list(keys), all=all), timeout).deleted

    def device_info(self, timeout=None):
        return self._call(self._stub.GetDeviceInfo, pb.GetDeviceInfoRequest(), timeout)

    def health(self, service="", timeout=None):
        """"SERVING", "NOT_SERVING", "SERVICE_UNKNOWN" or "UNKNOWN" ("" is the
        server; "kfuse.v1.Tuning" says whether it can tune)."""
        try:
            data = self._health(_health_request(service), timeout=self._timeout(timeout))
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return "SERVICE_UNKNOWN"
            raise from_rpc_error(e) from None
        return _health_status(data)

    # Helpers.
    @staticmethod
    def request(chain, *, target=0, arch_specific=False, mode=None, budget_seconds=0.0,
                background=False, force=False, include_source=False, env=None):
        """The CompileRequest for a Chain (builder), a kfuse.v1.Chain, or a
        kfuse.v1.CompileRequest (returned as given)."""
        if isinstance(chain, pb.CompileRequest):
            return chain
        proto = chain.to_proto() if isinstance(chain, Chain) else chain
        if not isinstance(proto, pb.Chain):
            raise TypeError(f"expected a kfuse.Chain or kfuse.v1.Chain; got {type(chain).__name__}")
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {[m for m in _MODES if m]}")
        req = pb.CompileRequest(
            chain=proto, target=_target(target, arch_specific),
            policy=pb.TuningPolicy(mode=_MODES[mode], budget_seconds=budget_seconds,
                                   background=background, force=force),
            request_id=uuid.uuid4().hex[:16], include_source=include_source)
        req.env.client = CLIENT_NAME
        req.env.driver_version = installed_driver_version()
        if env is not None:
            req.env.MergeFrom(env)
        return req

    def _timeout(self, timeout):
        if timeout is None:
            return self.timeout
        _check_timeout(timeout)
        return timeout

    def _call(self, method, req, timeout, fallback=False):
        try:
            return method(req, timeout=self._timeout(timeout), metadata=self._metadata)
        except grpc.RpcError as e:
            return self._failed(e, fallback)

    def _failed(self, e, fallback):
        err = from_rpc_error(e)
        if not isinstance(err, ServerUnavailable):
            raise err from None
        what = "did not answer in time" if err.code == "DEADLINE_EXCEEDED" else "is unreachable"
        err = ServerUnavailable(err.code, f"kfused at {self.address} {what}: {err.message}")
        if not fallback or self.on_unavailable == "raise":
            raise err from None
        with self._warn_lock:
            first, self._warned = not self._warned, True
        if first:
            warnings.warn(f"{err.message}; running eagerly (further failures are silent)",
                          FallbackWarning, stacklevel=3)
        return None

    def _verify(self, plan):
        if self._verify_key:
            from kfuse.signing import verify_plan

            verify_plan(plan, self._verify_key)


__all__ = ["Client", "CLIENT_NAME"]
