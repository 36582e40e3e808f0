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


def public_key_bytes(public_key_hex):
    """The 32 bytes of an Ed25519 public key given as 64 hex digits (as
    `kfused --print_public_key` prints); ValueError for anything else."""
    try:
        key = bytes.fromhex(public_key_hex.strip())
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ValueError("a public key is 64 hex digits (Ed25519, as kfused --print_public_key prints)")
    return key


def verify_plan(plan, public_key_hex):
    """Raises KfuseError(PERMISSION_DENIED) unless `plan` is signed by the
    key (64 hex digits, as `kfused --print_public_key` prints)."""
    try:
        from nacl.exceptions import BadSignatureError
        from nacl.signing import SigningKey, VerifyKey
    except ImportError as e:
        raise ImportError("verifying plan signatures needs PyNaCl: pip install 'kfuse[verify]'") from e
    raw = public_key_bytes(public_key_hex)
    key = VerifyKey(raw)
    if not plan.signature:
        raise KfuseError("PERMISSION_DENIED",
                         "plan is unsigned (the server has no signing key, or is not kfused)")
    payload = signing_payload(plan)
    try:
        key.verify(payload, plan.signature)
    except (BadSignatureError, ValueError):
        pass
    else:
        return
    # Pinning the signing key file (the seed) instead of the public key is an
    # easy slip, as both are 64 hex digits: say so, and never echo the pinned
    # digits, which would print part of a secret.
    try:
        SigningKey(raw).verify_key.verify(payload, plan.signature)
    except (BadSignatureError, ValueError):
        raise KfuseError("PERMISSION_DENIED", "plan signature does not verify against the pinned "
                         "key (compare it with `kfused --print_public_key`)") from None
    raise KfuseError("PERMISSION_DENIED", "the pinned key is the server's private signing key, not "
                     "its public key: pin what `kfused --print_public_key` prints, and keep the "
                     "signing key file secret")


__all__ = ["signing_payload", "verify_plan"]
