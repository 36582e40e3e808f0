#!/usr/bin/env python3
"""Tests of torch_block.py that need no GPU: the cases against their float64
references on CPU tensors, the correctness check, one case's run with a
wrong and a failing implementation, the bare launch's argument binding over
a fake driver, and the tables and verdicts.

  build-torch/venv/bin/python -m pytest -q bench/gpu/torch_block_test.py
  python3 -m pytest -q bench/gpu/torch_block_test.py    # without torch: the torch parts skip
"""
import ctypes
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_block as tb  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    from kfuse import pb
except ImportError:
    pb = None

SMALL = tb.Sizes(3, hidden=64, ff=48, heads=2, queries=4, keys=32)


@unittest.skipIf(torch is None, "no torch")
class CasesTest(unittest.TestCase):
    def test_cases_compute_their_float64_references(self):
        for i, case in enumerate(tb.CASES):
            with self.subTest(case=case.name):
                xs = tb.make_inputs(case, SMALL, "cpu", seed=i, dtype=torch.float64)
                got = tb.as_tuple(case.fn(*xs))
                want = case.reference(*xs)
                self.assertEqual(len(got), len(want))
                self.assertEqual([list(t.shape) for t in want], case.outputs(SMALL))
                for g, w in zip(got, want):
                    torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)

    def test_references_are_what_the_cases_say(self):
        # Rotary: cos = 1, sin = 0 keeps x; cos = 0, sin = 1 gives cat(-x2, x1).
        x = torch.randn(2, 3, 128, dtype=torch.float64)
        one, zero = torch.ones(2, 128, dtype=torch.float64), torch.zeros(2, 128, dtype=torch.float64)
        torch.testing.assert_close(tb.rotary_ref(x, one, zero)[0], x)
        torch.testing.assert_close(tb.rotary_ref(x, zero, one)[0],
                                   torch.cat([-x[..., 64:], x[..., :64]], -1))
        # Softmax: rows sum to one, and the scale is 1/sqrt(128).
        s = torch.tensor([[0.0, 128 ** 0.5 * 2.0]], dtype=torch.float64)
        p = tb.softmax_ref(s)[0]
        torch.testing.assert_close(p.sum(-1), torch.ones(1, dtype=torch.float64))
        self.assertAlmostEqual(p[0, 1].item() / p[0, 0].item(), 2.718281828459045 ** 2)
        # add + RMSNorm: a row of twos with weight 3 normalises to threes.
        x, r = torch.ones(1, 8, dtype=torch.float64), torch.ones(1, 8, dtype=torch.float64)
        s, n = tb.add_rms_norm_ref(x, r, torch.full((8,), 3.0, dtype=torch.float64))
        torch.testing.assert_close(s, 2 * x)
        torch.testing.assert_close(n, torch.full((1, 8), 3.0, dtype=torch.float64), atol=1e-5, rtol=0)
        # SwiGLU: silu of the first half times the second.
        h = torch.tensor([[1.0, -2.0, 3.0, 5.0]], dtype=torch.float64)
        torch.testing.assert_close(tb.swiglu_ref(h)[0],
                                   torch.tensor([[3.0 / (1 + 2.718281828459045 ** -1),
                                                  -2.0 / (1 + 2.718281828459045 ** 2) * 5.0]],
                                                dtype=torch.float64))

    def test_bf16_outputs_pass_the_check(self):
        for i, case in enumerate(tb.CASES):
            with self.subTest(case=case.name):
                xs = tb.make_inputs(case, SMALL, "cpu", seed=10 + i)
                ref = case.reference(*[t.double() for t in xs])
                eager = tb.as_tuple(case.fn(*xs))
                for e, r in zip(eager, ref):
                    self.assertEqual(e.dtype, torch.bfloat16)
                    v = tb.check(e, r, e)
                    self.assertTrue(v["ok"], v["msg"])
                    # The reference rounded to bf16 once is at least as good as eager.
                    v = tb.check(r.to(torch.bfloat16), r, e)
                    self.assertTrue(v["ok"], v["msg"])

    def test_nbytes_and_shapes(self):
        t, h, f = 4096, 4096, 11008
        by = {c.name: c for c in tb.CASES}
        self.assertEqual(by["add_rms_norm"].nbytes(tb.FULL), 2 * (4 * t * h + h))
        self.assertEqual(by["swiglu"].nbytes(tb.FULL), 2 * (t * 2 * f + t * f))
        self.assertEqual(by["rotary"].nbytes(tb.FULL), 2 * (2 * t * 32 * 128 + 2 * t * 128))
        self.assertEqual(by["softmax"].nbytes(tb.FULL), 2 * 2 * 32 * 1024 * 1024)
        self.assertEqual(by["softmax"].outputs(tb.QUICK), [[32 * 128, 1024]])
        self.assertEqual(by["swiglu"].shape_text(tb.QUICK), "h [512, 22016]")


@unittest.skipIf(torch is None, "no torch")
class CheckTest(unittest.TestCase):
    def setUp(self):
        case = tb.CASES[1]  # SwiGLU
        xs = tb.make_inputs(case, SMALL, "cpu", seed=7)
        self.ref = case.reference(*[t.double() for t in xs])[0]
        self.eager = case.fn(*xs)

    def test_one_wrong_element_is_caught(self):
        bad = self.eager.clone()
        bad[1, 5] += 1.0
        v = tb.check(bad, self.ref, self.eager)
        self.assertFalse(v["ok"], v["msg"])
        self.assertGreater(v["err"], v["tol"])

    def test_one_ulp_off_passes(self):
        near = self.eager.clone()
        near[1, 5] = near[1, 5] * (1 + 2 ** -7)  # One bf16 ulp.
        self.assertNotEqual(near[1, 5].item(), self.eager[1, 5].item())
        self.assertTrue(tb.check(near, self.ref, self.eager)["ok"])

    def test_nan_inf_shape_and_dtype_are_caught(self):
        bad = self.eager.clone()
        bad[0, 0] = float("nan")
        v = tb.check(bad, self.ref, self.eager)
        self.assertFalse(v["ok"])
        self.assertIn("1 NaN/inf positions differ", v["msg"])
        bad[0, 0] = float("inf")
        self.assertFalse(tb.check(bad, self.ref, self.eager)["ok"])
        self.assertFalse(tb.check(self.eager.float(), self.ref, self.eager)["ok"])
        self.assertFalse(tb.check(self.eager[:, :-1], self.ref, self.eager)["ok"])


@unittest.skipIf(torch is None, "no torch")
class RunCaseTest(unittest.TestCase):
    def test_wrong_and_failing_implementations_are_never_timed(self):
        case = tb.CASES[0]  # add + RMSNorm: two outputs
        xs = tb.make_inputs(case, SMALL, "cpu", seed=3)
        timed = []

        def timer(fn, inputs):
            timed.append(fn)
            return {"us": 20.0 if fn is case.fn else 10.0}

        def off_by_one(x, r, w):
            s, n = case.fn(x, r, w)
            n = n.clone()
            n[2, 7] += 1.0
            return s, n

        def raises():
            raise RuntimeError("launch refused")

        def fast(*a):
            return case.fn(*a)

        builders = [("eager", lambda: (case.fn, None), 1),
                    ("compile", lambda: (case.fn, lambda: "compiled"), 1),
                    ("kfuse", lambda: (off_by_one, None), 1),
                    ("backend", raises, 1)]
        row = tb.run_case(case, SMALL, xs, builders, timer, lambda: None, lambda: 100.0,
                          log=lambda s: None)
        im = row["impls"]
        self.assertEqual({k: v["status"] for k, v in im.items()},
                         {"eager": "ok", "compile": "ok", "kfuse": "wrong", "backend": "failed"})
        self.assertNotIn("us", im["kfuse"])
        self.assertIn("launch refused", im["backend"]["note"])
        self.assertEqual(im["compile"]["info"], "compiled")
        self.assertEqual(im["eager"]["GBps"], round(case.nbytes(SMALL) / 20.0 / 1e3, 1))
        self.assertEqual(len(im["compile"]["check"]), 2)
        self.assertNotIn(off_by_one, timed)
        self.assertEqual(row["summary"]["verdict"], "not met (wrong result)")

        builders[2] = ("kfuse", lambda: (fast, None), 1)
        builders[3] = ("backend", lambda: (fast, None), 1000)  # More time than is left.
        row = tb.run_case(case, SMALL, xs, builders, timer, lambda: None, lambda: 100.0,
                          log=lambda s: None)
        self.assertEqual(row["impls"]["backend"]["status"], "skipped")
        self.assertEqual(row["summary"], {"kfuse_vs_compile": 2.0, "backend_vs_compile": None,
                                          "verdict": "met"})

    def test_a_wrong_output_count_is_wrong(self):
        case = tb.CASES[0]
        xs = tb.make_inputs(case, SMALL, "cpu", seed=4)
        row = tb.run_case(case, SMALL, xs, [("kfuse", lambda: (lambda *a: case.fn(*a)[0], None), 1)],
                          lambda fn, i: {"us": 1.0}, lambda: None, lambda: 100.0, log=lambda s: None)
        self.assertEqual(row["impls"]["kfuse"]["status"], "wrong")
        self.assertIn("1 outputs; want 2", row["impls"]["kfuse"]["check"][0])


class FakeDriver:
    """The cuda.bindings.driver calls RawLaunch makes; launches decode their
    argument arrays with the kinds in `params` (entry -> kinds)."""

    class CUresult:
        CUDA_SUCCESS = 0

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self, params):
        self.log, self.params = [], params

    def CUstream(self, s):
        return s

    def cuModuleLoadData(self, image):
        self.log.append(("load", bytes(image)))
        return 0, bytes(image)

    def cuModuleGetFunction(self, module, name):
        return 0, name.decode()

    def cuFuncSetAttribute(self, fn, attr, value):
        self.log.append(("smem", fn, value))
        return (0,)

    def cuMemsetD8Async(self, ptr, value, n, stream):
        self.log.append(("memset", ptr, value, n, stream))
        return (0,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, args, extra):
        kinds = self.params[fn]
        ptrs = (ctypes.c_void_p * len(kinds)).from_address(args)
        vals = [{"i32": ctypes.c_int32, "i64": ctypes.c_int64}.get(k, ctypes.c_uint64).from_address(p).value
                for k, p in zip(kinds, ptrs)]
        self.log.append(("launch", fn, (gx, gy, gz), (bx, by, bz), smem, stream, vals))
        return (0,)


@unittest.skipIf(torch is None or pb is None, "needs torch and the kfuse package")
class RawLaunchTest(unittest.TestCase):
    def plan(self):
        E = pb.Expr
        plan = pb.KernelPlan(key="k")
        for name in ("x", "y"):
            plan.inputs.add(name=name, dtype=pb.DTYPE_BF16, shape=[pb.Dim(size=4), pb.Dim(size=8)])
        plan.outputs.add(name="out", dtype=pb.DTYPE_BF16, shape=[pb.Dim(size=4), pb.Dim(size=8)])
        plan.intermediates.add(bytes=E(constant=128))
        k0 = plan.kernels.add(entry="k0", arch="sm_90", cubin=b"cubin0", dynamic_smem_bytes=64 << 10)
        k0.grid.x.CopyFrom(E(constant=3))
        k0.block.x.CopyFrom(E(constant=128))
        for ref in (pb.BufferRef(input=1), pb.BufferRef(input=0), pb.BufferRef(intermediate=0)):
            k0.params.add(kind=pb.Param.KIND_BUFFER, buffer=ref)
        k0.params.add(kind=pb.Param.KIND_WORKSPACE, workspace_bytes=E(constant=256), workspace_zeroed=True)
        k0.params.add(kind=pb.Param.KIND_SCALAR, value=E(constant=-5), scalar_dtype=pb.DTYPE_I32)
        k1 = plan.kernels.add(entry="k1", arch="sm_90", cubin=b"cubin1")
        k1.grid.x.CopyFrom(E(constant=1))
        k1.block.x.CopyFrom(E(constant=32))
        k1.params.add(kind=pb.Param.KIND_BUFFER, buffer=pb.BufferRef(intermediate=0))
        k1.params.add(kind=pb.Param.KIND_BUFFER, buffer=pb.BufferRef(output=0))
        k1.params.add(kind=pb.Param.KIND_SCALAR, value=E(constant=1 << 40), scalar_dtype=pb.DTYPE_I64)
        return plan

    def test_binds_the_plans_arguments_once(self):
        cu = FakeDriver({"k0": ["ptr", "ptr", "ptr", "ptr", "i32"], "k1": ["ptr", "ptr", "i64"]})
        x, y, out = (torch.zeros(4, 8, dtype=torch.bfloat16) for _ in range(3))
        allocs = []

        def alloc(n):
            allocs.append(torch.empty(max(n, 1), dtype=torch.uint8))
            return allocs[-1]

        raw = tb.RawLaunch(cu, self.plan(), [x, y], [out], alloc, stream=77)
        self.assertEqual([n for _, n in [(a, a.numel()) for a in allocs]], [128, 256])
        self.assertIn(("smem", "k0", 64 << 10), cu.log)
        del cu.log[:]
        raw()
        raw()
        inter, ws = allocs[0].data_ptr(), allocs[1].data_ptr()
        k0 = ("launch", "k0", (3, 1, 1), (128, 1, 1), 64 << 10, 77,
              [y.data_ptr(), x.data_ptr(), inter, ws, -5])
        k1 = ("launch", "k1", (1, 1, 1), (32, 1, 1), 0, 77, [inter, out.data_ptr(), 1 << 40])
        memset = ("memset", ws, 0, 256, 77)
        self.assertEqual(cu.log, [memset, k0, k1, memset, k0, k1])

    def test_refuses_a_cluster_launch(self):
        plan = self.plan()
        plan.kernels[1].cluster.x.CopyFrom(pb.Expr(constant=2))
        x, y, out = (torch.zeros(4, 8, dtype=torch.bfloat16) for _ in range(3))
        with self.assertRaisesRegex(RuntimeError, "k1: cluster"):
            tb.RawLaunch(FakeDriver({}), plan, [x, y], [out], lambda n: torch.empty(n, dtype=torch.uint8), 0)


def impl(status, us=None, **kw):
    rec = {"status": status, **kw}
    if us is not None:
        rec.update(us=us, GBps=round(1e6 / us / 1e3, 1))
    return rec


def case_row(name, impls):
    row = {"case": name, "title": name.replace("_", " "), "shapes": "x [8, 8]", "bytes": 2e6,
           "impls": impls}
    row["summary"] = tb.summarize(row)
    return row


def result(cases, overhead_rows):
    return {"date": "2026-12-01", "device": "NVIDIA H200", "torch": "2.11.0", "server": "127.0.0.1:7500",
            "mode": "full", "quick": False, "seconds": 400, "sizes": tb.FULL.as_dict(),
            "cases": cases, "overhead": {"cases": overhead_rows}, "notes": ["a note"]}


class FormatTest(unittest.TestCase):
    def test_verdicts(self):
        ok = lambda us: impl("ok", us)  # noqa: E731
        s = tb.summarize({"impls": {"compile": ok(10.0), "kfuse": ok(10.0)}})
        self.assertEqual((s["kfuse_vs_compile"], s["verdict"]), (1.0, "met"))
        s = tb.summarize({"impls": {"compile": ok(9.0), "kfuse": ok(10.0), "backend": ok(4.5)}})
        self.assertEqual((s["kfuse_vs_compile"], s["backend_vs_compile"], s["verdict"]), (0.9, 2.0, "not met"))
        s = tb.summarize({"impls": {"compile": impl("wrong"), "kfuse": ok(10.0)}})
        self.assertEqual((s["kfuse_vs_compile"], s["verdict"]), (None, "unknown (no torch.compile figure)"))
        self.assertEqual(tb.summarize({"impls": {"compile": ok(9.0), "kfuse": impl("failed")}})["verdict"],
                         "not met (failed)")
        self.assertEqual(tb.summarize({"impls": {"compile": ok(9.0)}})["verdict"], "not measured")

    def test_overhead_headline_is_the_worst_case(self):
        rows = [{"case": "a", "over_launch_us": 4.0}, {"case": "b", "over_launch_us": 9.5},
                {"case": "c", "note": "failed: x"}]
        self.assertEqual(tb.overhead_summary(rows),
                         {"over_launch_us": 9.5, "case": "b", "cases": 2, "verdict": "met"})
        rows.append({"case": "d", "over_launch_us": 10.0})
        self.assertEqual(tb.overhead_summary(rows)["verdict"], "not met")
        self.assertEqual(tb.overhead_summary(rows[2:3])["verdict"], "not measured")

    def test_markdown_table(self):
        cases = [case_row("swiglu", {"eager": impl("ok", 200.0), "compile": impl("ok", 100.0),
                                     "kfuse": impl("ok", 80.0, first_call_s=12.5, info="1 kernel(s), tuned"),
                                     "backend": impl("skipped", note="3 s left, 45 s needed")}),
                 case_row("softmax", {"eager": impl("ok", 50.0), "compile": impl("ok", 40.0),
                                      "kfuse": impl("wrong", check=["max err 1 (eager 0.01, tol 0.1)"]),
                                      "backend": impl("failed", note="a|b")})]
        over = [{"case": "swiglu", "title": "SwiGLU", "shapes": "h [4, 22016]",
                 "host_us": {"kfuse": 140.0, "raw": 4.0, "launcher": 110.0, "compile": 30.0, "eager": 9.0},
                 "over_launch_us": 136.0, "over_launcher_us": 30.0, "note": "1 kernel(s), heuristic"}]
        md = tb.markdown(result(cases, over))
        lines = md.splitlines()
        self.assertEqual(lines[0], "# kfuse.torch on a transformer block's memory-bound parts "
                                   "(NVIDIA H200, 2026-12-01)")
        self.assertIn("| swiglu | x [8, 8] | 2 | 200.0 (5) | 100.0 (10) | 80.0 (12) | skipped "
                      "| 1.25x | - | met |", lines)
        self.assertIn("| softmax | x [8, 8] | 2 | 50.0 (20) | 40.0 (25) | WRONG | failed "
                      "| - | - | not met (wrong result) |", lines)
        self.assertIn("Transformer-block parts at least as fast as torch.compile end to end: 1 of 2 met.",
                      lines)
        self.assertIn("| swiglu | kfuse.torch | 12.5 | 1 kernel(s), tuned | - |", lines)
        self.assertIn("| softmax | kfuse backend | - | a\\|b | - |", lines)
        self.assertIn("| SwiGLU | h [4, 22016] | 140.0 | 4.0 | 110.0 | 136.0 | 30.0 | 30.0 | 9.0 "
                      "| 1 kernel(s), heuristic |", lines)
        self.assertIn("**Warm-call overhead: 136.0 us of host time per call above the bare launch "
                      "(the largest of 1 cases: swiglu); target < 10 us: not met.**", lines)
        self.assertIn("- a note", lines)
        self.assertIn('kfuse.torch.fuse(fn, mode="full"', md)
        for line in lines:
            if line.startswith("|"):  # Every table row has its header's column count.
                self.assertIn(line.count("|") - line.count("\\|"), (11, 6, 11))

    def test_nothing_measured(self):
        md = tb.markdown(result([], []))
        self.assertIn("**Warm-call overhead: not measured; target < 10 us: not measured.**", md)
        self.assertNotIn("at least as fast", md)

    def test_write_results(self):
        with tempfile.TemporaryDirectory() as d:
            r = result([case_row("swiglu", {"compile": impl("ok", 10.0), "kfuse": impl("ok", 8.0)})],
                       [{"case": "swiglu", "title": "SwiGLU", "shapes": "h [4, 22016]",
                         "host_us": {"kfuse": 7.0, "raw": 4.0}, "over_launch_us": 3.0}])
            stem = tb.write_results(r, d)
            self.assertEqual(os.path.basename(stem), "2026-12-01-torch-block")
            with open(stem + ".json") as f:
                back = json.load(f)
            self.assertEqual(back["cases"][0]["summary"]["verdict"], "met")
            self.assertEqual(back["overhead_summary"]["verdict"], "met")
            with open(stem + ".md") as f:
                self.assertIn("target < 10 us: met.", f.read())
            r["quick"] = True
            self.assertTrue(tb.write_results(r, d).endswith("2026-12-01-torch-block-quick"))

    def test_main_refuses_without_torch_or_gpu(self):
        if torch is not None and torch.cuda.is_available():
            self.skipTest("a GPU is present")
        self.assertEqual(tb.main(["--server", "127.0.0.1:1"]), 2)


if __name__ == "__main__":
    unittest.main()


@unittest.skipIf(pb is None, "no kfuse client (pip install ./clients/python)")
class PlanTextTest(unittest.TestCase):
    def test_counts_failed_trials(self):
        plan = pb.KernelPlan()
        plan.kernels.add()
        p = plan.provenance
        p.state = pb.TUNE_STATE_TUNED
        p.trials = 24
        p.tuning_seconds = 8.6
        self.assertEqual(tb._plan_text(plan), "1 kernel(s), tuned, 24 trials in 8.6 s")
        c = p.failed_trials.add()
        c.outcome = pb.Trial.OUTCOME_FAULT
        c.count = 2
        self.assertEqual(tb._plan_text(plan),
                         "1 kernel(s), tuned, 24 trials in 8.6 s, 2 failed (fault 2)")
