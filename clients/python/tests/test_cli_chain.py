"""`kfuse chain` (the C++ builder's composites) and the Python builder write
the same chain for the same composite, op for op, so the two clients share
cache keys. Skips when the CLI is not built (scripts/setup, or KFUSE_CLI)."""
import json
import os
import subprocess

import pytest

import kfuse
from conftest import REPO

CLI = os.environ.get("KFUSE_CLI", os.path.join(REPO, "build", "clients", "kfuse"))


def _cli_chain(args):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"kfuse not built at {CLI} (run scripts/setup, or set KFUSE_CLI)")
    out = subprocess.run([CLI, "chain", *args], check=True, capture_output=True, text=True,
                         timeout=30).stdout
    return kfuse.Chain.from_json(json.dumps(json.loads(out))).to_proto()


def _softmax_scaled_masked():
    c = kfuse.Chain()
    x = c.input("x", "f32", [2, 8])
    m = c.input("mask", "bool", [2, 8])
    c.output("y", kfuse.softmax(x, scale=2.0, mask=m))
    return c


def _softmax_fraction_scale_bias():
    c = kfuse.Chain()
    x = c.input("x", "bf16", [2, 8])
    b = c.input("bias", "bf16", [2, 8])
    c.output("y", kfuse.softmax(x, scale=0.125, bias=b))
    return c


def _layer_norm_whole_eps():
    c = kfuse.Chain()
    x = c.input("x", "f32", [2, 8])
    w = c.input("weight", "f32", [8])
    b = c.input("bias", "f32", [8])
    c.output("y", kfuse.layer_norm(x, w, b, eps=1.0))
    return c


def _rms_norm_symbolic():
    c = kfuse.Chain()
    x = c.input("x", "f32", [kfuse.Sym("R", hint=64), 8])
    w = c.input("weight", "f32", [8])
    c.output("y", kfuse.rms_norm(x, w))
    return c


def _add_rms_norm():
    c = kfuse.Chain()
    x = c.input("x", "f32", [2, 8])
    r = c.input("residual", "f32", [2, 8])
    w = c.input("weight", "f32", [8])
    s, y = kfuse.add_rms_norm(x, r, w)
    c.output("sum", s)
    c.output("normed", y)
    return c


def _attention_masked_whole_scale():
    c = kfuse.Chain()
    q = c.input("q", "bf16", [1, 4, 16, 8])
    k = c.input("k", "bf16", [1, 2, 16, 8])
    v = c.input("v", "bf16", [1, 2, 16, 8])
    m = c.input("mask", "bool", [1, 4, 16, 16])
    c.output("out", kfuse.attention(q, k, v, mask=m, scale=1.0))
    return c


def _cross_entropy():
    c = kfuse.Chain()
    x = c.input("x", "f32", [2, 8])
    t = c.input("labels", "i64", [2])
    c.output("loss", kfuse.cross_entropy(x, t))
    return c


CASES = {
    "softmax --width 8 --rows 2 --scale 2 --mask": _softmax_scaled_masked,
    "softmax --dtype bf16 --width 8 --rows 2 --scale 0.125 --bias": _softmax_fraction_scale_bias,
    "layer_norm --width 8 --rows 2 --eps 1 --bias": _layer_norm_whole_eps,
    "rms_norm --width 8 --rows-symbol R --rows-hint 64": _rms_norm_symbolic,
    "add_rms_norm --width 8 --rows 2": _add_rms_norm,
    "attention --dtype bf16 --heads 4 --kv-heads 2 --seq 16 --head-dim 8 --mask --scale 1":
        _attention_masked_whole_scale,
    "cross_entropy --width 8 --rows 2": _cross_entropy,
}


@pytest.mark.parametrize("args", sorted(CASES))
def test_cli_and_python_write_one_chain(args):
    cli, python = _cli_chain(args.split()), CASES[args]().to_proto()
    assert str(cli) == str(python)  # Text, so that a failure shows the differing lines.
    assert cli == python
