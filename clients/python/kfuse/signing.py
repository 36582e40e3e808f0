"""Verification of kfused's Ed25519 plan signatures against a pinned key
(docs/security.md): the payload is rebuilt exactly as PlanSigningPayload in
plan/signing.cc builds it.

    verify_plan(plan, "3b6a...64 hex digits")   # raises KfuseError PERMISSION_DENIED
"""
import hashlib

from kfuse.errors import KfuseError
from kfuse.v1 import kfuse_pb2 as pb


def _s(name, value):
    data = value.encode() if isinstance(value, str) else value
    return f"{name} {len(data)}:".encode() + data + b"\n"


def _h(data):
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def signing_payload(plan):
    """The bytes kfused signs for `plan` (a kfuse.v1.KernelPlan)."""
    out = [b"kfuse.v1 plan signature\n", _s("key", plan.key),
           f"kernels {len(plan.kernels)}\n".encode()]
    for k in plan.kernels:
        out += [_s("entry", k.entry), _s("arch", k.arch),
                f"cubin {_h(k.cubin)}\n".encode(), f"ptx {_h(k.ptx)}\n".encode()]
        launch = pb.Kernel(params=k.params, dynamic_smem_bytes=k.dynamic_smem_bytes,
                           preconditions=k.preconditions)
        for f in ("grid", "block", "cluster"):
            if k.HasField(f):
                getattr(launch, f).CopyFrom(getattr(k, f))
        out.append(f"launch {_h(launch.SerializeToString(deterministic=True))}\n".encode())
    shape = pb.KernelPlan(symbols=plan.symbols, intermediates=plan.intermediates,
                          inputs=plan.inputs, outputs=plan.outputs)
    out.append(f"plan {_h(shape.SerializeToString(deterministic=True))}\n".encode())
    return b"".join(out)


def verify_plan(plan, public_key_hex):
    """Raises KfuseError(PERMISSION_DENIED) unless `plan` is signed by the
    key (64 hex digits, as `kfused --print_public_key` prints)."""
    try:
        from nacl.exceptions import BadSignatureError
        from nacl.signing import VerifyKey
    except ImportError as e:
        raise ImportError("verifying plan signatures needs PyNaCl: pip install 'kfuse[verify]'") from e
    hexkey = public_key_hex.strip()
    try:
        key = VerifyKey(bytes.fromhex(hexkey))
    except ValueError as e:
        raise ValueError("a public key is 64 hex digits (Ed25519, as kfused --print_public_key "
                         "prints)") from e
    if not plan.signature:
        raise KfuseError("PERMISSION_DENIED",
                         "plan is unsigned (the server has no signing key, or is not kfused)")
    try:
        key.verify(signing_payload(plan), plan.signature)
    except (BadSignatureError, ValueError):
        raise KfuseError("PERMISSION_DENIED", "plan signature does not verify against the pinned "
                         f"key {hexkey[:16]}...") from None


__all__ = ["signing_payload", "verify_plan"]
