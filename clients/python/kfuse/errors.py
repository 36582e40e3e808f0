"""Exceptions of the kfuse client.

    try:
        client.compile(chain)
    except KfuseError as e:
        print(e.code, e.op, e.kind, e.message)  # INVALID_ARGUMENT 0 add ...
"""
import re

_OP_RE = re.compile(r"\bop (\d+) \(([a-z0-9_]+|kind -?\d+)\)")  # An older server's unknown kind too.
# A field of a wire op the server refused before typing it
# ("ops[3].axis: reduce_sum takes no axis"): its index, and the kind where
# the message says it.
_WIRE_OP_RE = re.compile(r"\bops\[(\d+)\]\.\w+(?:\[\d+\])?: (?:([a-z0-9_]+) takes no )?")
# Client text (names) in the server's messages is quoted, with \" and \\
# escaped: it is not looked into for an op, whatever it says.
_QUOTED_RE = re.compile(r'"(?:[^"\\]|\\.)*"')


class KfuseError(Exception):
    """The server (or the launcher) refused: `code` is the gRPC status name,
    `message` its text, `op` the chain op it names ("op N (kind)", or
    "ops[N].field" where the server refused the op before typing it), if
    any, and `kind` its kind where the message says it."""

    def __init__(self, code, message, op=None, kind=None):
        self.code = code
        self.message = message
        if op is None:
            text = _QUOTED_RE.sub('""', message or "")
            m = _OP_RE.search(text) or _WIRE_OP_RE.search(text)
            if m:
                op, kind = int(m.group(1)), m.group(2)
        self.op = op
        self.kind = kind
        super().__init__(f"{code}: {message}")


class ServerUnavailable(KfuseError):
    """kfused could not be reached (UNAVAILABLE), or did not answer in time
    (DEADLINE_EXCEEDED: a host that accepts but never answers, or a server
    too loaded to)."""


class LaunchError(KfuseError):
    """A launch was refused (a precondition, a mismatched tensor) or the
    driver failed; nothing was launched when code is FAILED_PRECONDITION or
    INVALID_ARGUMENT."""


class FallbackWarning(RuntimeWarning):
    """Emitted once per Client when kfused is unreachable and calls fall
    back to eager execution."""


_UNREACHABLE = ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def from_rpc_error(err):
    """A KfuseError from a grpc.RpcError: a ServerUnavailable for
    UNAVAILABLE and DEADLINE_EXCEEDED."""
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    name = code.name if code is not None else "UNKNOWN"
    if name in _UNREACHABLE:
        return ServerUnavailable(name, details or "server unavailable")
    return KfuseError(name, details or "")


__all__ = ["KfuseError", "ServerUnavailable", "LaunchError", "FallbackWarning",
           "from_rpc_error"]
