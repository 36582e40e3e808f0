#!/usr/bin/env python3
"""Writes the attention suite's chains with the client library's composite
(kfuse.chain.attention), so the benchmark tunes exactly the expansion a
client sends: <case>.json at full size beside this file, quick/<case>.json
at the smoke-run sizes. The cases (shapes, causal, lengths) are
bench/gpu/suite.py's attention_cases().

  build-torch/venv/bin/python -m pip install --quiet --force-reinstall --no-deps ./clients/python
  build-torch/venv/bin/python bench/gpu/cases/attention/make_cases.py [DIR]
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import suite  # noqa: E402


def build(case, quick):
    """The case's chain (a dict in the proto3 JSON mapping): inputs as the
    case lists them (q, k, v, and lengths where it has them), one output."""
    import kfuse

    c = kfuse.Chain()
    ins = [c.input(name, dt, shape) for name, dt, shape, _ in case.specs(quick)]
    q, k, v = ins[:3]
    lengths = ins[3] if len(ins) > 3 else None
    c.output("out", kfuse.attention(q, k, v, causal=case.causal, lengths=lengths))
    return json.loads(c.to_json())


def write(out_dir):
    n = 0
    for quick in (False, True):
        d = os.path.join(out_dir, "quick") if quick else out_dir
        os.makedirs(d, exist_ok=True)
        for case in suite.attention_cases():
            with open(os.path.join(d, case.name + ".json"), "w") as f:
                json.dump(build(case, quick), f, indent=1)
                f.write("\n")
            n += 1
    print(f"wrote {n} chains to {out_dir}")


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else HERE)
