"""Test doubles shared by the kfuse.torch and kfuse.backend tests."""
from kfuse import pb


def kinds(chain):
    """The op kinds of a kfuse.Chain, by name."""
    return [pb.OpKind.Name(op.kind) for op in chain.to_proto().ops]


class CountingClient:
    """A client double: forwards to `real` (or raises `error`), counting
    compiles; it has real's address and pinned key, as the shared plan
    cache keys by them."""

    def __init__(self, real=None, error=None):
        self.real, self.error, self.calls = real, error, 0
        self.address = getattr(real, "address", "fake")
        self.verify_key = getattr(real, "verify_key", None)

    def compile(self, chain, **kw):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.real.compile(chain, **kw)
