#!/usr/bin/env python3
"""The memory-bound parts of a Llama-like transformer block through
kfuse.torch, against eager PyTorch and torch.compile, end to end (launch
overhead included), on one GPU in one process; and the host overhead of a
warm kfuse.torch call above the bare launch.

    python3 bench/gpu/torch_block.py --server 127.0.0.1:PORT --out bench/results [--quick]

kfused must be running at --server; the kfuse package must be importable
(PYTHONPATH=.gpu/py, the installed package copied there, as bench/gpu/README.md
says; .gpu/py is also tried when the import fails). Writes
<date>-torch-block[-quick].{md,json} into --out, rewritten after each step so
a cut-off run keeps what it measured.

Cases (bf16; tokens 4096, --quick 512; hidden 4096; ff 11008; 32 heads x 128):
  add_rms_norm  (x + r, rms_norm(x + r) * w), both returned
  swiglu        a, b = h.chunk(2, -1); silu(a) * b        over [tokens, 2 x 11008]
  rotary        x * cos + cat([-x[..., 64:], x[..., :64]], -1) * sin
                on [tokens, 32, 128], cos/sin [tokens, 128] broadcast over heads
  softmax       softmax(scores * 1/sqrt(128), -1) over [32 x 1024 queries, 1024 keys]
                (--quick: 128 queries)
Each is run as: eager; torch.compile (default mode, static shapes);
kfuse.torch.fuse(fn, mode="full"); torch.compile with the kfuse backend
(kfuse.backend.Backend(mode="full")). Correctness comes first: every
output against a float64 reference written independently of the case,
error <= 2 x eager's error + 4 eps(bf16) x max|ref|; a wrong or failed
implementation is reported and not timed. Timing: CUDA events around N
back-to-back calls after a warm-up, the median of several repeats, as us per
call and GB/s (each input read once, each output written once).

Warm-call overhead: on tiny inputs (4 tokens) each case's kfuse.torch call
is timed on the host (time.perf_counter around 200 calls, no
synchronisation inside; the median of 21 rounds) beside the bare launch of
the same plan: a raw cuLaunchKernel of the plan's cubins with pre-bound
arguments and pre-allocated outputs (the target's baseline), and
kfuse.Launcher.launch with the cached plan. torch.compile and eager on the
same inputs are timed the same way for reference.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import signal
import statistics
import sys
import time
import warnings

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # The formatting half works without torch (torch_block_test.py).
    torch = F = None

BF16_EPS = 2.0 ** -7
EPS = {"torch.bfloat16": BF16_EPS, "torch.float16": 2.0 ** -10, "torch.float32": 2.0 ** -23,
       "torch.float64": 2.0 ** -52}
RMS_EPS = 1e-6
HEAD_DIM = 128
SOFTMAX_SCALE = HEAD_DIM ** -0.5
OVERHEAD_TARGET_US = 10.0
SPEED_TARGET = 1.0  # kfuse.torch throughput / torch.compile throughput.
IMPLS = ("eager", "compile", "kfuse", "backend")
IMPL_NAMES = {"eager": "eager", "compile": "torch.compile", "kfuse": "kfuse.torch",
              "backend": "kfuse backend"}


class Sizes:
    def __init__(self, tokens, hidden=4096, ff=11008, heads=32, queries=1024, keys=1024):
        self.tokens, self.hidden, self.ff, self.heads = tokens, hidden, ff, heads
        self.queries, self.keys = queries, keys

    def as_dict(self):
        return dict(vars(self), head_dim=HEAD_DIM)


FULL, QUICK, TINY = Sizes(4096), Sizes(512, queries=128), Sizes(4, queries=4)


# ---------------------------------------------------------------------------
# The cases: what eager, torch.compile and kfuse run, and float64 references
# written without the case's formulation.

def add_rms_norm(x, r, w):
    s = x + r
    return s, F.rms_norm(s, (s.shape[-1],), w, RMS_EPS)


def swiglu(h):
    a, b = h.chunk(2, -1)
    return F.silu(a) * b


def rotary(x, cos, sin):
    rot = torch.cat([-x[..., 64:], x[..., :64]], -1)
    return x * cos.unsqueeze(1) + rot * sin.unsqueeze(1)


def softmax(scores):
    return torch.softmax(scores * SOFTMAX_SCALE, -1)


def add_rms_norm_ref(x, r, w):
    s = x + r
    return s, s / torch.sqrt((s * s).mean(-1, keepdim=True) + RMS_EPS) * w


def swiglu_ref(h):
    n = h.shape[-1] // 2
    a, b = h[:, :n], h[:, n:]
    return (a / (1 + torch.exp(-a)) * b,)


def rotary_ref(x, cos, sin):
    h = HEAD_DIM // 2
    x1, x2 = x[..., :h], x[..., h:]
    c1, c2 = cos[:, None, :h], cos[:, None, h:]
    s1, s2 = sin[:, None, :h], sin[:, None, h:]
    out = torch.empty_like(x)
    out[..., :h] = x1 * c1 - x2 * s1
    out[..., h:] = x2 * c2 + x1 * s2
    return (out,)


def softmax_ref(scores):
    z = scores * SOFTMAX_SCALE
    e = torch.exp(z - z.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True),)


class Case:
    """inputs(sizes): [(name, shape)]; outputs(sizes): [shape]; all bf16."""

    def __init__(self, name, title, fn, reference, inputs, outputs):
        self.name, self.title, self.fn, self.reference = name, title, fn, reference
        self.inputs, self.outputs = inputs, outputs

    def nbytes(self, sizes):
        """Each input read once, each output written once (bf16)."""
        shapes = [s for _, s in self.inputs(sizes)] + self.outputs(sizes)
        return 2 * sum(math.prod(s) for s in shapes)

    def shape_text(self, sizes):
        return ", ".join(f"{n} {list(s)}" for n, s in self.inputs(sizes))


CASES = [
    Case("add_rms_norm", "add + RMSNorm", add_rms_norm, add_rms_norm_ref,
         lambda s: [("x", [s.tokens, s.hidden]), ("residual", [s.tokens, s.hidden]),
                    ("weight", [s.hidden])],
         lambda s: [[s.tokens, s.hidden]] * 2),
    Case("swiglu", "SwiGLU", swiglu, swiglu_ref,
         lambda s: [("h", [s.tokens, 2 * s.ff])], lambda s: [[s.tokens, s.ff]]),
    Case("rotary", "rotary embedding", rotary, rotary_ref,
         lambda s: [("x", [s.tokens, s.heads, HEAD_DIM]), ("cos", [s.tokens, HEAD_DIM]),
                    ("sin", [s.tokens, HEAD_DIM])],
         lambda s: [[s.tokens, s.heads, HEAD_DIM]]),
    Case("softmax", "scaled softmax", softmax, softmax_ref,
         lambda s: [("scores", [s.heads * s.queries, s.keys])],
         lambda s: [[s.heads * s.queries, s.keys]]),
]


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def make_inputs(case, sizes, device, seed, dtype=None):
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return [torch.randn(shape, generator=g, device=device, dtype=dtype or torch.bfloat16)
            for _, shape in case.inputs(sizes)]


def check(got, ref, eager):
    """One output against the float64 reference, eager's error the yardstick:
    {"ok", "err", "eager_err", "tol", "msg"}. NaN/inf positions must match."""
    if tuple(got.shape) != tuple(ref.shape) or got.dtype != eager.dtype:
        return {"ok": False, "err": None, "eager_err": None, "tol": None,
                "msg": f"got {got.dtype} {list(got.shape)}; want {eager.dtype} {list(ref.shape)}"}
    g, r, e = got.double(), ref.double(), eager.double()
    special = ((torch.isnan(g) != torch.isnan(r)) | (torch.isinf(g) != torch.isinf(r)) |
               (torch.isinf(g) & torch.isinf(r) & (torch.sign(g) != torch.sign(r)))).sum().item()
    zero = torch.zeros((), dtype=torch.float64, device=g.device)
    err = (g - r).abs().where(torch.isfinite(g) & torch.isfinite(r), zero).max().item()
    eager_err = (e - r).abs().where(torch.isfinite(e) & torch.isfinite(r), zero).max().item()
    max_ref = r.abs().where(torch.isfinite(r), zero).max().item()
    tol = 2 * eager_err + 4 * EPS[str(got.dtype)] * max_ref
    ok = special == 0 and err <= tol
    msg = f"max err {err:.3g} (eager {eager_err:.3g}, tol {tol:.3g})"
    if special:
        msg += f", {special} NaN/inf positions differ"
    return {"ok": ok, "err": err, "eager_err": eager_err, "tol": tol, "msg": msg}


# ---------------------------------------------------------------------------
# One case: check, then time, each implementation.

def run_case(case, sizes, inputs, builders, timer, sync, time_left, log=print, warn_of=Warning):
    """A result row for `case` on `inputs`. builders: [(impl, build, seconds
    it needs at least)]; build() -> (fn, describe) where describe() gives
    notes after the first call (or None). timer(fn, inputs) -> {"us", ...}.
    Warnings of category `warn_of` raised by the build and first call are
    kept. A wrong output or an exception is recorded, never timed."""
    ref = case.reference(*[t.double() for t in inputs])
    eager_out = as_tuple(case.fn(*inputs))
    nbytes = case.nbytes(sizes)
    row = {"case": case.name, "title": case.title, "shapes": case.shape_text(sizes),
           "bytes": nbytes, "impls": {}}
    for impl, build, need in builders:
        left = time_left()
        if left < need:
            row["impls"][impl] = {"status": "skipped",
                                  "note": f"{left:.0f} s left, {need:.0f} s needed"}
            continue
        rec = row["impls"][impl] = {"status": "failed"}
        try:
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fn, describe = build()
                fn(*inputs)
                sync()
            rec["first_call_s"] = round(time.perf_counter() - t0, 2)
            if describe is not None:
                rec["info"] = describe()
            said = sorted({f"{w.category.__name__}: {w.message}" for w in caught
                           if issubclass(w.category, warn_of)})
            if said:
                rec["warnings"] = [x[:300] for x in said]
            got = as_tuple(fn(*inputs))
            sync()
            if len(got) != len(eager_out):
                checks = [{"ok": False, "msg": f"{len(got)} outputs; want {len(eager_out)}"}]
            else:
                checks = [check(g, r, e) for g, r, e in zip(got, ref, eager_out)]
            rec["check"] = [c["msg"] for c in checks]
            del got
            if not all(c["ok"] for c in checks):
                rec["status"] = "wrong"
                log(json.dumps({"case": case.name, "impl": impl, **rec}))
                continue
            rec.update(timer(fn, inputs))
            rec["GBps"] = round(nbytes / rec["us"] / 1e3, 1)
            rec["status"] = "ok"
        except Exception as e:  # noqa: BLE001 (reported in the row; the others still run)
            rec["status"], rec["note"] = "failed", f"{type(e).__name__}: {e}"[:400]
        log(json.dumps({"case": case.name, "impl": impl, **rec}))
    row["summary"] = summarize(row)
    return row


def summarize(row):
    """kfuse.torch (and the backend) against torch.compile: throughput ratios
    (torch.compile us / kfuse us) and the target's verdict."""
    im = row["impls"]
    ok = lambda k: im.get(k, {}).get("status") == "ok"  # noqa: E731
    ratio = lambda k: im["compile"]["us"] / im[k]["us"] if ok(k) and ok("compile") else None  # noqa: E731
    k = im.get("kfuse", {}).get("status", "skipped")
    if k == "wrong":
        verdict = "not met (wrong result)"
    elif k == "failed":
        verdict = "not met (failed)"
    elif k != "ok":
        verdict = "not measured"
    elif not ok("compile"):
        verdict = "unknown (no torch.compile figure)"
    else:
        verdict = "met" if ratio("kfuse") >= SPEED_TARGET else "not met"
    return {"kfuse_vs_compile": ratio("kfuse"), "backend_vs_compile": ratio("backend"),
            "verdict": verdict}


# ---------------------------------------------------------------------------
# Warm-call overhead.

class RawLaunch:
    """The plan's kernels as bare cuLaunchKernel calls on `stream`, arguments
    bound once (inputs, outputs, and intermediates and workspaces from
    alloc(nbytes)); zeroed workspaces get a cuMemsetD8Async before their
    kernel, as kfuse.Launcher does. `cu`: cuda.bindings.driver."""

    def __init__(self, cu, plan, inputs, outputs, alloc, stream):
        from kfuse.launch import resolve

        cfg = resolve(plan, inputs, outputs)
        self.cu, self.stream = cu, cu.CUstream(stream)
        inter = [alloc(n) for n in cfg.intermediate_bytes]
        self.keep, self.calls, modules = [inputs, outputs, inter], [], {}
        for kl in cfg.kernels:
            kernel = plan.kernels[kl.kernel]
            if kl.empty:
                continue
            if kl.cluster != (0, 0, 0):
                raise RuntimeError(f"{kernel.entry}: cluster launches are not bound here")
            if kernel.cubin not in modules:
                modules[kernel.cubin] = self._load(kernel)
            f = self._ok(cu.cuModuleGetFunction(modules[kernel.cubin], kernel.entry.encode()),
                         "cuModuleGetFunction")
            if kl.dynamic_smem_bytes > 0:  # Static + dynamic may pass 48 KiB.
                attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                self._ok(cu.cuFuncSetAttribute(f, attr, kl.dynamic_smem_bytes), "cuFuncSetAttribute")
            vals, zero = [], []
            for kind, v in kl.params:
                if kind == "buffer":
                    t = {"input": inputs, "output": outputs, "intermediate": inter}[v[0]][v[1]]
                    vals.append(ctypes.c_uint64(t.data_ptr()))
                elif kind in ("i32", "i64"):
                    vals.append((ctypes.c_int32 if kind == "i32" else ctypes.c_int64)(v))
                elif kind == "workspace":
                    w = alloc(v[0])
                    self.keep.append(w)
                    if v[1] and v[0]:
                        zero.append((w.data_ptr(), v[0]))
                    vals.append(ctypes.c_uint64(w.data_ptr()))
                else:
                    raise RuntimeError(f"{kernel.entry}: {kind} parameters are not bound here")
            ptrs = (ctypes.c_void_p * max(len(vals), 1))(*[ctypes.addressof(x) for x in vals])
            self.keep += [vals, ptrs]
            self.calls.append((f, kl.grid, kl.block, kl.dynamic_smem_bytes, ctypes.addressof(ptrs),
                               zero))
        self.modules = modules

    def _ok(self, res, what):
        err, rest = (res[0], res[1:]) if isinstance(res, tuple) else (res, ())
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what}: {err}")
        return rest[0] if len(rest) == 1 else rest

    def _load(self, kernel):
        res = self.cu.cuModuleLoadData(kernel.cubin)
        if res[0] != self.cu.CUresult.CUDA_SUCCESS and kernel.ptx:
            res = self.cu.cuModuleLoadData(kernel.ptx.encode() + b"\0")
        return self._ok(res, f"cuModuleLoadData({kernel.entry})")

    def __call__(self):
        cu, stream, success = self.cu, self.stream, self.cu.CUresult.CUDA_SUCCESS
        for f, g, b, smem, args, zero in self.calls:
            for p, n in zero:
                err, = cu.cuMemsetD8Async(p, 0, n, stream)
                if err != success:
                    raise RuntimeError(f"cuMemsetD8Async: {err}")
            err, = cu.cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2], smem, stream, args, 0)
            if err != success:
                raise RuntimeError(f"cuLaunchKernel: {err}")


def host_times(loops, sync, calls=200, rounds=21):
    """Median host us per call of each zero-argument loop body, the loops
    taking turns round by round; the GPU is drained before each timed loop
    and not waited for inside it."""
    for fn in loops.values():
        for _ in range(20):
            fn()
    samples = {name: [] for name in loops}
    for _ in range(rounds):
        for name, fn in loops.items():
            sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    sync()
    return {name: round(statistics.median(s), 2) for name, s in samples.items()}


def overhead_summary(rows):
    """The headline: the worst case's kfuse.torch host us above the bare
    cuLaunchKernel, against the target."""
    got = [r for r in rows if r.get("over_launch_us") is not None]
    if not got:
        return {"over_launch_us": None, "verdict": "not measured", "case": None}
    worst = max(got, key=lambda r: r["over_launch_us"])
    us = worst["over_launch_us"]
    return {"over_launch_us": us, "case": worst["case"], "cases": len(got),
            "verdict": "met" if us < OVERHEAD_TARGET_US else "not met"}


# ---------------------------------------------------------------------------
# Tables.

def _f(x, fmt="{:.1f}"):
    return "-" if x is None else fmt.format(x)


def _md(text):
    """Text for a table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _cell(rec):
    s = (rec or {}).get("status", "-")
    if s == "ok":
        return f"{rec['us']:.1f} ({rec['GBps']:.0f})"
    return {"wrong": "WRONG", "failed": "failed", "skipped": "skipped"}.get(s, s)


METHOD = (
    "bf16, fresh torch.randn inputs. Per call: CUDA events around N back-to-back calls (N "
    "for about 25 ms) after a warm-up, the median of 7 repeats (5 with --quick); outputs are "
    "allocated by each call as a caller's would be; inputs stay the same between calls "
    "(what fits in L2 is partly read from it). GB/s: each input read once and each "
    "output written once. Before timing, each implementation's outputs (its second call) are "
    "checked against a float64 reference written independently of the case: error <= 2 x "
    "eager's error + 4 eps(bf16) x max|ref|, NaN/inf positions equal; a wrong result is not "
    "timed. torch.compile: default mode, dynamic=False. kfuse.torch: "
    "kfuse.torch.fuse(fn, mode=MODE, fallback=\"raise\"). kfuse backend: "
    "torch.compile(fn, backend=kfuse.backend.Backend(mode=MODE), dynamic=False). "
    "Ratios: torch.compile us / kfuse us (throughput); target >= 1.0x.")

OVERHEAD_METHOD = (
    "Tiny inputs (4 tokens; softmax 32 x 4 rows of 1024), so the GPU never sets the pace. "
    "Host time: time.perf_counter around 200 back-to-back calls with the GPU drained before "
    "and not waited for inside, the median of 21 rounds, the loops taking turns. The bare "
    "launch is the same plan's cubins loaded with cuModuleLoadData and launched with "
    "cuLaunchKernel on pre-bound arguments and pre-allocated outputs (intermediates and "
    "workspaces allocated once); overhead = kfuse.torch call - bare launch (what the target "
    "judges), and kfuse.torch call - kfuse.Launcher.launch(plan, inputs, outputs) with the "
    "cached plan (the wrapper's own share). kfuse.torch plans for this part are compiled "
    "with mode=\"heuristic\" (no tuning: the host path does not depend on the variant). "
    "torch.compile (default mode, dynamic=False) and eager calls on the same inputs are timed "
    "the same way for reference.")


def markdown(result):
    s = result["sizes"]
    lines = [f"# kfuse.torch on a transformer block's memory-bound parts ({result['device']}, "
             f"{result['date']}{', quick sizes' if result['quick'] else ''})", "",
             f"torch {result['torch']}; kfused at {result['server']}; kfuse mode "
             f"`{result['mode']}`. Sizes: {s['tokens']} tokens, hidden {s['hidden']}, ff "
             f"{s['ff']}, {s['heads']} heads x {s['head_dim']}, softmax over {s['heads']} x "
             f"{s['queries']} queries x {s['keys']} keys.", "",
             METHOD.replace("MODE", f"\"{result['mode']}\""), "",
             "us per call (GB/s):", "",
             "| case | inputs | MB moved | eager | torch.compile | kfuse.torch | kfuse backend "
             "| kfuse.torch vs torch.compile | backend vs torch.compile | target >= 1.0x |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    met = 0
    for r in result["cases"]:
        sm, im = r["summary"], r["impls"]
        met += sm["verdict"] == "met"
        lines.append(
            f"| {r['title']} | {r['shapes']} | {r['bytes'] / 1e6:.0f} | "
            + " | ".join(_cell(im.get(k)) for k in IMPLS)
            + f" | {_f(sm['kfuse_vs_compile'], '{:.2f}x')} | {_f(sm['backend_vs_compile'], '{:.2f}x')}"
            f" | {sm['verdict']} |")
    if result["cases"]:
        lines += ["", f"Transformer-block parts at least as fast as torch.compile end to end: "
                  f"{met} of {len(result['cases'])} met."]
        lines += ["", "First calls (wall seconds: trace, compile or tune, load, launch) and "
                  "checks:", "", "| case | implementation | first call s | notes | check |",
                  "| --- | --- | ---: | --- | --- |"]
        for r in result["cases"]:
            for k in IMPLS:
                rec = r["impls"].get(k)
                if rec is None:
                    continue
                notes = "; ".join(x for x in [rec.get("info"), rec.get("note")]
                                  + rec.get("warnings", []) if x)
                check_text = "; ".join(rec.get("check", [])) or "-"
                lines.append(f"| {r['title']} | {IMPL_NAMES[k]} | {_f(rec.get('first_call_s'))} "
                             f"| {_md(notes or '-')} | {_md(check_text)} |")
    ov = result.get("overhead") or {}
    head = overhead_summary(ov.get("cases", []))
    lines += ["", "## Warm-call overhead (host)", "", OVERHEAD_METHOD, "",
              "Host us per call:", "",
              "| case | inputs | kfuse.torch | bare cuLaunchKernel | kfuse.Launcher.launch "
              "| overhead above the bare launch | above Launcher.launch | torch.compile | eager "
              "| notes |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in ov.get("cases", []):
        h = r.get("host_us", {})
        lines.append(f"| {r['title']} | {r['shapes']} | {_f(h.get('kfuse'))} | {_f(h.get('raw'))} "
                     f"| {_f(h.get('launcher'))} | {_f(r.get('over_launch_us'))} "
                     f"| {_f(r.get('over_launcher_us'))} | {_f(h.get('compile'))} "
                     f"| {_f(h.get('eager'))} | {_md(r.get('note') or '-')} |")
    if head["over_launch_us"] is None:
        lines += ["", f"**Warm-call overhead: not measured; target < {OVERHEAD_TARGET_US:g} us: "
                  "not measured.**"]
    else:
        lines += ["", f"**Warm-call overhead: {head['over_launch_us']:.1f} us of host time per "
                  f"call above the bare launch (the largest of {head['cases']} cases: "
                  f"{head['case']}); target < {OVERHEAD_TARGET_US:g} us: {head['verdict']}.**"]
    if result.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def write_results(result, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"{result['date']}-torch-block" + ("-quick" if result["quick"] else ""))
    result["overhead_summary"] = overhead_summary((result.get("overhead") or {}).get("cases", []))
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    with open(stem + ".md", "w") as f:
        f.write(markdown(result))
    return stem


# ---------------------------------------------------------------------------
# The GPU run.

class TimeLimit(BaseException):
    """Raised by SIGALRM / SIGTERM; not an Exception, so per-implementation
    handlers let it through to the writer."""


def _import_kfuse():
    """kfuse with kfuse.torch and kfuse.backend loaded; from .gpu/py when it
    is not on the path."""
    try:
        import kfuse
    except ImportError:
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".gpu", "py")
        if not os.path.isdir(here):
            raise
        sys.path.insert(0, os.path.abspath(here))
        import kfuse
    import kfuse.backend  # noqa: F401
    import kfuse.torch  # noqa: F401
    return kfuse


def _driver():
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        from cuda import cuda as cu
    return cu


def cuda_timer(target_ms, repeats):
    def timer(fn, inputs):
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            fn(*inputs)
        torch.cuda.synchronize()
        est_us = (time.perf_counter() - t0) / 5 * 1e6
        calls = max(10, min(2000, int(target_ms * 1e3 / max(est_us, 1.0))))
        for _ in range(min(calls, 20)):
            fn(*inputs)
        samples = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn(*inputs)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / calls)
        return {"us": round(statistics.median(samples), 2), "calls": calls,
                "samples_us": [round(x, 2) for x in samples]}
    return timer


def _plan_text(plan):
    from kfuse import pb

    p = plan.provenance
    state = pb.TuneState.Name(p.state).replace("TUNE_STATE_", "").lower()
    text = f"{len(plan.kernels)} kernel(s), {state}"
    if p.trials:
        text += f", {p.trials} trials in {p.tuning_seconds:.1f} s"
    if p.failed_trials:
        kinds = ", ".join(f"{pb.Trial.Outcome.Name(c.outcome).replace('OUTCOME_', '').lower()} {c.count}"
                          for c in p.failed_trials)
        text += f", {sum(c.count for c in p.failed_trials)} failed ({kinds})"
    if p.reason:
        text += f" ({p.reason})"
    return text


def _backend_text(b):
    if not b.graphs:
        return "no graph compiled"
    g = b.graphs[-1]
    text = (f"{len(g.regions)} region(s): " + "; ".join(r.name for r in g.regions)
            if g.regions else "no region fused (runs as eager ATen ops)")
    return text + (f"; eager: {', '.join(g.eager)}" if g.eager else "")


def bench(args):
    kfuse = _import_kfuse()
    kt, kb = kfuse.torch, kfuse.backend
    sizes = QUICK if args.quick else FULL
    start = time.monotonic()
    deadline = start + args.seconds

    def time_left():
        return deadline - time.monotonic()

    def on_signal(signum, _frame):
        raise TimeLimit(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(max(1, int(args.seconds)))

    torch.cuda.init()
    torch.empty(1, device="cuda")
    cu = _driver()
    cu.cuInit(0)
    client = kfuse.Client(args.server, timeout=args.compile_timeout, on_unavailable="raise")
    result = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "server": args.server, "mode": args.mode,
              "quick": args.quick, "seconds": args.seconds, "sizes": sizes.as_dict(),
              "method": METHOD.replace("MODE", args.mode), "overhead_method": OVERHEAD_METHOD,
              "cases": [], "overhead": {"cases": []}, "notes": []}
    print(json.dumps({k: result[k] for k in ("device", "torch", "server", "mode", "quick")}), flush=True)
    only = set(args.cases.split(",")) if args.cases else None
    cases = [c for c in CASES if only is None or c.name in only]
    sync = torch.cuda.synchronize

    def cap_deadline():  # A Compile RPC's deadline never outlives the run.
        client.timeout = max(5.0, min(args.compile_timeout, time_left() - 5))

    def overhead_row(i, case):
        row = {"case": case.name, "title": case.title, "shapes": case.shape_text(TINY), "host_us": {}}
        result["overhead"]["cases"].append(row)
        if time_left() < 20:
            row["note"] = "skipped: not enough time left"
            return
        try:
            inputs = make_inputs(case, TINY, "cuda", seed=100 + i)
            ff = kt.fuse(case.fn, client=client, mode="heuristic", fallback="raise")
            cap_deadline()
            got = as_tuple(ff(*inputs))
            plan = ff.plan_for(*inputs)
            outs = [torch.empty_like(t) for t in got]
            stream = torch.cuda.current_stream().cuda_stream
            raw = RawLaunch(cu, plan, inputs, outs,
                            lambda n: torch.empty(max(n, 1), dtype=torch.uint8, device="cuda"), stream)
            raw()
            sync()
            same = all(torch.equal(a, b) for a, b in zip(got, outs))
            launcher = ff.launcher
            loops = {"kfuse": lambda: ff(*inputs), "raw": raw,
                     "launcher": lambda: launcher.launch(plan, inputs, outs, stream=stream),
                     "eager": lambda: case.fn(*inputs)}
            row["host_us"] = host_times(loops, sync)
            h = row["host_us"]
            row["over_launch_us"] = round(h["kfuse"] - h["raw"], 2)
            row["over_launcher_us"] = round(h["kfuse"] - h["launcher"], 2)
            row["plan"] = _plan_text(plan)
            row["note"] = row["plan"] + ("" if same else "; the bare launch's output differs from "
                                         "kfuse.torch's (its figure is suspect)")
        except Exception as e:  # noqa: BLE001
            row["note"] = f"failed: {type(e).__name__}: {e}"[:400]
        print(json.dumps({"overhead": row}), flush=True)

    def overhead_reference(i, case, row):
        """torch.compile's host time per call on the same tiny inputs."""
        if time_left() < 40:
            row["note"] = (row.get("note") or "") + "; torch.compile reference skipped (time)"
            return
        try:
            inputs = make_inputs(case, TINY, "cuda", seed=100 + i)
            torch._dynamo.reset()
            cf = torch.compile(case.fn, dynamic=False)
            cf(*inputs)
            row["host_us"].update(host_times({"compile": lambda: cf(*inputs)}, sync))
        except Exception as e:  # noqa: BLE001
            row["note"] = (row.get("note") or "") + f"; torch.compile reference failed: {e}"[:300]
        finally:
            torch._dynamo.reset()

    def builders(case, inputs):
        def eager():
            return case.fn, None

        def compiled():
            torch._dynamo.reset()
            return torch.compile(case.fn, dynamic=False), None

        def fused():
            cap_deadline()
            ff = kt.fuse(case.fn, client=client, mode=args.mode, fallback="raise")
            return ff, lambda: _plan_text(ff.plan_for(*inputs))

        def backend():
            torch._dynamo.reset()
            cap_deadline()
            b = kb.Backend(client=client, mode=args.mode, fallback="warn")
            return torch.compile(case.fn, backend=b, dynamic=False), lambda: _backend_text(b)

        need = 25 if args.quick else 45
        return [("eager", eager, 5), ("compile", compiled, need), ("kfuse", fused, need),
                ("backend", backend, need)]

    timer = cuda_timer(25.0, 5 if args.quick else 7)
    doing = ["the start"]  # What a stop by signal interrupted.
    try:
        with torch.inference_mode():
            print("== warm-call overhead (kfuse.torch, bare launch)", flush=True)
            for i, case in enumerate(cases):
                doing[0] = f"the warm-call overhead of {case.name}"
                overhead_row(i, case)
            write_results(result, args.out)
            for i, case in enumerate(cases):
                print(f"== {case.name}", flush=True)
                doing[0] = case.name
                if time_left() < 15:
                    result["notes"].append(f"{case.name}: not run, {time_left():.0f} s left of "
                                           f"--seconds {args.seconds:g}")
                    continue
                inputs = make_inputs(case, sizes, "cuda", seed=1234 + i)
                result["cases"].append(run_case(case, sizes, inputs, builders(case, inputs), timer,
                                                sync, time_left, warn_of=kfuse.FallbackWarning))
                del inputs
                torch._dynamo.reset()
                torch.cuda.empty_cache()
                write_results(result, args.out)
            print("== warm-call overhead (torch.compile reference)", flush=True)
            for i, case in enumerate(cases):
                row = next(r for r in result["overhead"]["cases"] if r["case"] == case.name)
                if row.get("over_launch_us") is not None:
                    doing[0] = f"the torch.compile reference call of {case.name}"
                    overhead_reference(i, case, row)
            write_results(result, args.out)
    except TimeLimit as e:
        why = (f"at the time limit (--seconds {args.seconds:g})" if str(e) == "SIGALRM"
               else f"by {e}")
        result["notes"].append(f"stopped {why} after {time.monotonic() - start:.0f} s, during "
                               f"{doing[0]}; what is missing was not measured")
    finally:
        signal.alarm(0)
    skipped = [f"{r['case']} {IMPL_NAMES[k]}" for r in result["cases"] for k, v in r["impls"].items()
               if v["status"] == "skipped"]
    if skipped:
        result["notes"].append("skipped for lack of time (--seconds " f"{args.seconds:g}): "
                               + ", ".join(skipped))
    stem = write_results(result, args.out)
    print(markdown(result))
    print(f"wrote {stem}.json and {stem}.md", flush=True)
    wrong = [r for r in result["cases"] for v in r["impls"].values() if v["status"] in ("wrong", "failed")]
    return 1 if wrong else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True, help="kfused address, host:port")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                 "results"))
    p.add_argument("--quick", action="store_true", help="512 tokens (softmax: 128 queries)")
    p.add_argument("--seconds", type=float, default=400, help="time limit of the whole run")
    p.add_argument("--mode", choices=("heuristic", "quick", "full"), default="full",
                   help="kfuse tuning mode of the measured plans")
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--compile-timeout", type=float, default=300,
                   help="deadline of one Compile RPC, seconds")
    args = p.parse_args(argv)
    if torch is None:
        print("torch_block.py needs PyTorch", file=sys.stderr)
        return 2
    unknown = set(filter(None, args.cases.split(","))) - {c.name for c in CASES}
    if unknown:
        p.error(f"--cases: unknown case(s) {sorted(unknown)}; have {[c.name for c in CASES]}")
    if not torch.cuda.is_available():
        print("torch_block.py needs a CUDA GPU", file=sys.stderr)
        return 2
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
