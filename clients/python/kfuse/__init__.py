"""kfuse: Python client of the kfuse kernel-fusion service.

    import kfuse
    c = kfuse.Chain()
    x = c.input("x", "f32", [kfuse.Sym("N", hint=1 << 20)])
    c.output("y", kfuse.silu(x) * 2.0)
    resp = kfuse.Client("127.0.0.1:7420").compile(c)

See clients/python/README.md.
"""
from kfuse.chain import *  # noqa: F401,F403
from kfuse.chain import __all__ as _chain_all
from kfuse.client import CLIENT_NAME, Client
from kfuse.errors import FallbackWarning, KfuseError, LaunchError, ServerUnavailable
from kfuse.launch import Buffer, Launcher, resolve
from kfuse import signing  # noqa: F401
from kfuse.v1 import kfuse_pb2 as pb

__version__ = "0.1.0"
__all__ = list(_chain_all) + ["Client", "CLIENT_NAME", "KfuseError", "ServerUnavailable",
                              "LaunchError", "FallbackWarning", "Buffer", "Launcher", "resolve",
                              "pb"]
