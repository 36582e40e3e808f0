#!/usr/bin/env python3
"""Tests of suite.py that need no GPU: the matmul cases' chain JSON (it
parses as kfuse.v1.Chain and computes what the eager function computes),
the launcher's binding of a two-kernel plan (one intermediate
shared by writer and reader, workspaces zeroed before each launch) over a
fake driver, the matmul verdicts; the attention cases (the committed chains
match the cases and what make_cases.py builds, and compute the float64
reference the check uses), their FLOP count, sampling, correctness verdict,
throughput verdicts and table.

  python3 bench/gpu/suite_test.py            # torch / kfuse-stub tests skip without them
  build-torch/venv/bin/python bench/gpu/suite_test.py
"""
import ctypes
import json
import os
import shutil
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases", "attention"))
import make_cases  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None
try:
    from google.protobuf import json_format
    from kfuse import pb
except ImportError:
    pb = None
try:
    import kfuse
except ImportError:
    kfuse = None


def matmul_chains(quick):
    with tempfile.TemporaryDirectory() as d:
        suite.write_cases(d, quick)
        out = {}
        for name in sorted(os.listdir(os.path.join(d, "matmul"))):
            with open(os.path.join(d, "matmul", name)) as f:
                out[name[:-len(".json")]] = json.load(f)
        return out


class MatmulChainsTest(unittest.TestCase):
    def test_cases_and_shapes(self):
        for quick in (False, True):
            chains = matmul_chains(quick)
            cases = {c.name: c for c in suite.all_cases("matmul")}
            self.assertEqual(set(chains), set(cases))
            self.assertEqual(len(cases), 7)
            for name, chain in chains.items():
                case = cases[name]
                dims = [[int(d["size"]) for d in t["shape"]] for t in chain["inputs"]]
                kinds = [op["kind"] for op in chain["ops"]]
                gemms = case.products(quick)
                if name.startswith("mlp"):
                    (t, f, d), (t2, d2, f2) = gemms
                    self.assertEqual(dims, [[t, d], [d, f], [f], [f, d]])
                    self.assertEqual((t2, d2, f2), (t, d, f))
                    self.assertEqual(kinds, ["OP_MATMUL", "OP_ADD", "OP_GELU_TANH", "OP_MATMUL"])
                    self.assertEqual(case.target, ("compile", 0.55))
                elif name.startswith("router"):
                    (m, n, k), = gemms
                    self.assertEqual(dims, [[m, k], [k, n]])
                    self.assertEqual(n, 128)
                    self.assertEqual(kinds, ["OP_MATMUL", "OP_REDUCE_MAX", "OP_SUB", "OP_EXP",
                                             "OP_REDUCE_SUM", "OP_DIV"])
                    self.assertEqual(case.target, ("compile", 1.0))
                    continue
                else:
                    (m, n, k), = gemms
                    self.assertEqual(dims, [[m, k], [k, n], [n]])
                    self.assertEqual(kinds, ["OP_MATMUL", "OP_ADD", "OP_GELU_TANH"])
                    self.assertEqual(case.target[1], 1.1 if m <= 64 else 0.55)
                # matmul(a, w), then add(product, bias): the product first.
                self.assertEqual(chain["ops"][0]["args"], [{"input": 0}, {"input": 1}])
                self.assertEqual(chain["ops"][1]["args"], [{"op": 0}, {"input": 2}])
                self.assertTrue(all(t["dtype"] == "DTYPE_BF16" for t in chain["inputs"]))

    def test_full_sizes_are_the_issue_shapes(self):
        got = {c.name: c.products(False) for c in suite.all_cases("matmul")}
        self.assertEqual(got["gemm_bias_gelu_m1_bf16"], [(1, 8192, 8192)])
        self.assertEqual(got["gemm_bias_gelu_m64_bf16"], [(64, 8192, 8192)])
        self.assertEqual(got["gemm_bias_gelu_8192_bf16"], [(8192, 8192, 8192)])
        self.assertEqual(got["mlp_gelu_bf16"], [(4096, 16384, 4096), (4096, 4096, 16384)])
        mlp = next(c for c in suite.all_cases("matmul") if c.name == "mlp_gelu_bf16")
        self.assertEqual(mlp.flops(False), 4 * 4096 * 4096 * 16384)
        m1 = next(c for c in suite.all_cases("matmul") if c.name == "gemm_bias_gelu_m1_bf16")
        self.assertEqual(m1.weight_bytes(False), (8192 + 8192 * 8192 + 8192) * 2)
        self.assertTrue(m1.small_m(False))
        self.assertFalse(mlp.small_m(False))

    @unittest.skipIf(pb is None, "no kfuse protobuf stubs")
    def test_chains_parse_as_wire_chains(self):
        for quick in (False, True):
            for name, chain in matmul_chains(quick).items():
                msg = json_format.Parse(json.dumps(chain), pb.Chain())
                self.assertEqual(msg.ops[0].kind, pb.OP_MATMUL, name)

    @unittest.skipIf(torch is None, "no torch")
    def test_chain_computes_what_eager_computes(self):
        ops = {"OP_MATMUL": lambda a, b: a @ b, "OP_ADD": lambda a, b: a + b,
               "OP_GELU_TANH": lambda a: F.gelu(a, approximate="tanh"),
               "OP_SUB": lambda a, b: a - b, "OP_DIV": lambda a, b: a / b, "OP_EXP": torch.exp,
               "OP_REDUCE_MAX": lambda a: a.amax(-1, keepdim=True),
               "OP_REDUCE_SUM": lambda a: a.sum(-1, keepdim=True)}
        ref_ops, _ = suite.torch_ops(torch, F, reference=True)
        g = torch.Generator().manual_seed(7)
        for name, chain in matmul_chains(True).items():
            case = next(c for c in suite.all_cases("matmul") if c.name == name)
            shapes = [[int(d["size"]) for d in t["shape"]] for t in chain["inputs"]]
            shapes[0][0] = min(shapes[0][0], 3)  # A few of the output's rows.
            scale = [0.02 if dom == "weight" else 1.0 for _, _, _, dom in case.specs(True)]
            xs = [torch.randn(s, generator=g, dtype=torch.float64) * k for s, k in zip(shapes, scale)]
            vals = []
            arg = lambda r: xs[r["input"]] if "input" in r else vals[r["op"]]  # noqa: E731
            for op in chain["ops"]:
                vals.append(ops[op["kind"]](*[arg(r) for r in op["args"]]))
            got = arg(chain["outputs"][0]["value"])
            want = case.fn(ref_ops, *xs)["y"]
            self.assertTrue(torch.allclose(got, want, rtol=1e-12, atol=1e-12), name)
            # case.vendor is not compared here: torch._addmm_activation's GELU
            # is tanh on CUDA and erf on the CPU; the bench reports its error.

    @unittest.skipIf(torch is None, "no torch")
    def test_check_flags_a_wrong_row(self):
        ref_ops, _ = suite.torch_ops(torch, F, reference=True)
        eager_ops, _ = suite.torch_ops(torch, F, reference=False)
        g = torch.Generator().manual_seed(3)
        a = torch.randn(8, 256, generator=g).bfloat16()
        w = torch.randn(256, 128, generator=g).bfloat16()
        b = torch.randn(128, generator=g).bfloat16()
        ref = suite.gemm_bias_gelu(ref_ops, a.double(), w.double(), b.double())["y"]
        eager = suite.gemm_bias_gelu(eager_ops, a, w, b)["y"]
        fused = F.gelu(a.float() @ w.float() + b.float(), approximate="tanh").bfloat16()
        self.assertTrue(suite.check(torch, fused, ref, eager)[0])
        wrong = fused.clone()
        wrong[5, 17] += 8 * ref.abs().max().item() * 2 ** -7 + 1
        self.assertFalse(suite.check(torch, wrong, ref, eager)[0])


class ReduceChainsTest(unittest.TestCase):
    """The reduce suite's chains: reductions over outer axes, kept, and a loss
    reducing per-row results."""

    def test_axes_and_plans(self):
        cases = {c.name: c for c in suite.all_cases("reduce")}
        self.assertEqual(set(cases), {"column_sum_bf16", "column_sum_f32", "sequence_mean_bf16",
                                      "center_columns_f32", "softmax_axis0_bf16",
                                      "standardize_softmax_bf16", "soft_target_loss_bf16",
                                      "mse_loss_bf16", "cross_entropy_bf16",
                                      "nll_log_softmax_bf16"})
        for quick in (False, True):
            reduces = {}
            for name, case in cases.items():
                ops = suite.chain_json(case, quick)["ops"]
                reduces[name] = [(o["kind"], o["reduce"]["axes"], o["reduce"]["keepdim"])
                                 for o in ops if "reduce" in o]
            self.assertEqual(reduces["column_sum_f32"], [("OP_REDUCE_SUM", [0], True)])
            self.assertEqual(reduces["sequence_mean_bf16"], [("OP_REDUCE_MEAN", [1], True)])
            self.assertEqual(reduces["softmax_axis0_bf16"],
                             [("OP_REDUCE_MAX", [0], True), ("OP_REDUCE_SUM", [0], True)])
            self.assertEqual(reduces["standardize_softmax_bf16"],
                             [("OP_REDUCE_MEAN", [0], True), ("OP_REDUCE_MEAN", [0], True),
                              ("OP_REDUCE_MAX", [-1], True), ("OP_REDUCE_SUM", [-1], True)])
            # Per-row terms without keepdim, then their mean over the batch.
            self.assertEqual(reduces["soft_target_loss_bf16"],
                             [("OP_REDUCE_MAX", [-1], True), ("OP_REDUCE_SUM", [-1], False),
                              ("OP_REDUCE_MAX", [-1], False), ("OP_REDUCE_SUM", [-1], False),
                              ("OP_REDUCE_MEAN", [0], False)])
            self.assertEqual(reduces["mse_loss_bf16"], [("OP_REDUCE_MEAN", [0, 1], False)])
            # The max twice, the sum of exps and the pick per row; the
            # losses' sum and the rows' count over the batch.
            self.assertEqual(reduces["cross_entropy_bf16"],
                             [("OP_REDUCE_MAX", [-1], True), ("OP_REDUCE_SUM", [-1], False),
                              ("OP_REDUCE_MAX", [-1], False), ("OP_REDUCE_SUM", [-1], False),
                              ("OP_REDUCE_SUM", [0], False), ("OP_REDUCE_SUM", [0], False)])
            # log_softmax's max and sum kept for its elements, then the pick.
            self.assertEqual(reduces["nll_log_softmax_bf16"],
                             [("OP_REDUCE_MAX", [-1], True), ("OP_REDUCE_SUM", [-1], True),
                              ("OP_REDUCE_SUM", [-1], False),
                              ("OP_REDUCE_SUM", [0], False), ("OP_REDUCE_SUM", [0], False)])
            ops = suite.chain_json(cases["cross_entropy_bf16"], quick)["ops"]
            iota = next(o for o in ops if o["kind"] == "OP_IOTA")
            self.assertEqual(iota["shape"]["shape"][0]["size"], "1003" if quick else "50257")
        # About 128M elements each, as the row suite's (whole rows of 50257).
        for case in cases.values():
            n = 1
            for d in case.specs(False)[0][2]:
                n *= d
            self.assertLess(abs(n - (1 << 27)), case.specs(False)[0][2][-1], case.name)

    @unittest.skipIf(torch is None, "no torch")
    def test_torch_ops_match_the_recorded_chain(self):
        ops, _ = suite.torch_ops(torch, F, reference=True)
        x = torch.randn(6, 5, dtype=torch.float64)
        case = next(c for c in suite.all_cases("reduce") if c.name == "softmax_axis0_bf16")
        got = case.fn(ops, x)["y"]
        torch.testing.assert_close(got, torch.softmax(x, 0))
        self.assertTrue(torch.allclose(got.sum(0), torch.ones(5, dtype=torch.float64)))

    @unittest.skipIf(torch is None, "no torch")
    def test_the_losses_are_torchs(self):
        ops, _ = suite.torch_ops(torch, F, reference=True)
        x = torch.randn(7, 11, dtype=torch.float64)
        target = torch.softmax(torch.randn(7, 11, dtype=torch.float64), -1)
        case = next(c for c in suite.all_cases("reduce") if c.name == "soft_target_loss_bf16")
        got = case.fn(ops, x, target)["loss"]
        self.assertEqual(got.shape, torch.Size([]))
        torch.testing.assert_close(got, F.cross_entropy(x, target))
        case = next(c for c in suite.all_cases("reduce") if c.name == "mse_loss_bf16")
        torch.testing.assert_close(case.fn(ops, x, target)["loss"], F.mse_loss(x, target))


class FakeTensor:
    def __init__(self, log, nbytes, ptr):
        self.log, self.nbytes, self.ptr = log, nbytes, ptr

    def data_ptr(self):
        return self.ptr

    def numel(self):
        return self.nbytes


class FakeTorch:
    uint8 = "uint8"

    def __init__(self, log):
        self.log, self.next = log, 0x100000
        self.cuda = types.SimpleNamespace(
            current_stream=lambda: types.SimpleNamespace(cuda_stream=0))

    def empty(self, n, dtype, device):
        self.next += 0x10000
        return FakeTensor(self.log, n, self.next)


class FakeDriver:
    """cuda.bindings.driver's calls the launcher makes; launches decode their
    argument arrays with the parameter kinds of `params` (entry -> kinds)."""

    class CUresult:
        CUDA_SUCCESS = 0

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self, log, params):
        self.log, self.params = log, params

    def CUstream(self, s):
        return s

    def CUdeviceptr(self, p):
        return p

    def cuMemsetD8Async(self, ptr, value, n, stream):
        self.log.append(("zero", ptr, value, n))
        return (0,)

    def cuModuleLoadData(self, image):
        return 0, image

    def cuModuleGetFunction(self, module, name):
        return 0, name.decode()

    def cuFuncSetAttribute(self, fn, attr, value):
        self.log.append(("smem", fn, value))
        return (0,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, args, extra):
        kinds = self.params[fn]
        ptrs = (ctypes.c_void_p * len(kinds)).from_address(args)
        vals = []
        for kind, p in zip(kinds, ptrs):
            ctype = {"i32": ctypes.c_int32, "i64": ctypes.c_int64}.get(kind, ctypes.c_uint64)
            vals.append(ctype.from_address(p).value)
        self.log.append(("launch", fn, (gx, gy, gz), (bx, by, bz), smem, vals))
        return (0,)


def manifest_kernel(entry, params, grid, smem=0):
    return {"entry": entry, "arch": "sm_90a", "cubin": entry + ".cubin", "variant": "bm=128",
            "grid": grid, "block": [256, 1, 1], "cluster": [0, 0, 0], "smem": smem,
            "empty": False, "registers": 128, "params": params}


class LauncherTest(unittest.TestCase):
    def launcher(self, manifest, log):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        for k in manifest["kernels"]:
            with open(os.path.join(d, k["cubin"]), "wb") as f:
                f.write(b"cubin " + k["entry"].encode())
        path = os.path.join(d, "m.json")
        with open(path, "w") as f:
            json.dump(manifest, f)
        kinds = {k["entry"]: [p.get("dtype", p["kind"]) for p in k["params"]]
                 for k in manifest["kernels"]}
        return suite.KfuseLauncher(FakeTorch(log), FakeDriver(log, kinds), path)

    def test_two_kernel_plan_shares_its_intermediate(self):
        buf = lambda kind, i: {"kind": kind, "index": i}  # noqa: E731
        ins = [buf("input", i) for i in range(4)]
        m = {"intermediate_bytes": [4096 * 16384 * 2], "kernels": [
            manifest_kernel("k0", ins + [buf("intermediate", 0),
                                         {"kind": "workspace", "bytes": 1 << 20, "zeroed": False},
                                         {"kind": "workspace", "bytes": 512, "zeroed": True},
                                         {"kind": "scalar", "value": 4096, "dtype": "i64"}],
                            [2048, 1, 1], smem=160 * 1024),
            manifest_kernel("k1", ins + [buf("intermediate", 0), buf("output", 0),
                                         {"kind": "scalar", "value": -3, "dtype": "i32"}],
                            [512, 1, 1])]}
        log = []
        launcher = self.launcher(m, log)
        self.assertIn(("smem", "k0", 160 * 1024), log)
        inputs = [FakeTensor(log, 0, 0xA000 + i) for i in range(4)]
        outputs = [FakeTensor(log, 0, 0xB000)]
        run = launcher.bind(inputs, outputs)
        del log[:]
        run()
        run()
        launches = [e for e in log if e[0] == "launch"]
        self.assertEqual([e[1] for e in launches], ["k0", "k1", "k0", "k1"])
        k0, k1 = launches[0][5], launches[1][5]
        self.assertEqual(k0[:4], [0xA000, 0xA001, 0xA002, 0xA003])
        self.assertEqual(k1[:4], [0xA000, 0xA001, 0xA002, 0xA003])
        self.assertEqual(k0[4], k1[4])  # The intermediate k0 writes is the one k1 reads.
        self.assertNotIn(k0[4], (k0[5], k0[6]))
        self.assertEqual(k0[7], 4096)
        self.assertEqual(k1[5:], [0xB000, -3])
        self.assertEqual(launches[0][2:5], ((2048, 1, 1), (256, 1, 1), 160 * 1024))
        # The zeroed workspace, whole, before each k0 launch; the other never.
        zero = ("zero", k0[6], 0, 512)
        self.assertEqual([e for e in log if e[0] == "zero"], [zero] * 2)
        self.assertEqual(log.index(zero), 0)
        self.assertEqual(log[log.index(launches[1]) + 1], zero)

    def test_refuses_what_it_cannot_launch(self):
        m = {"intermediate_bytes": [], "kernels": [
            manifest_kernel("k0", [{"kind": "intermediate", "index": 0}], [1, 1, 1])]}
        run = self.launcher(m, [])
        with self.assertRaisesRegex(RuntimeError, "intermediate 0 of 0"):
            run.bind([], [])
        m["kernels"][0]["cluster"] = [2, 1, 1]
        with self.assertRaisesRegex(RuntimeError, "cluster"):
            self.launcher(m, [])


def row(case, kfuse_ms, cublaslt_ms, compile_ms, target, correct=True, compile_s=6.0, gemms=1):
    rec = lambda ms: {"ms": ms, "TFLOPs": 1.0 / ms, "GBps": 2.0 / ms}  # noqa: E731
    return {"case": case, "gemms": [(64, 8192, 8192)] * gemms, "small_m": True, "target": target,
            "state": "TUNE_STATE_TUNED", "reason": "", "trials": 12, "tuning_s": 5.5,
            "compile_s": compile_s, "correct": correct, "check": "max err 0", "copy_GBps": 4000.0,
            "variant": "bm=16", "kfuse": rec(kfuse_ms),
            "cublaslt": rec(cublaslt_ms) if cublaslt_ms else None,
            "compile": rec(compile_ms), "eager": rec(2.0)}


class VerdictTest(unittest.TestCase):
    def test_targets(self):
        s = suite.matmul_summary(row("a", 1.0, 1.2, 3.0, ["cublaslt", 1.1]))
        self.assertAlmostEqual(s["kfuse_over_cublaslt"], 1.2)
        self.assertEqual(s["verdict"], "met")
        self.assertEqual(s["tuning_verdict"], "met")
        s = suite.matmul_summary(row("b", 1.0, 1.05, 3.0, ["cublaslt", 1.1], compile_s=12.0))
        self.assertEqual((s["verdict"], s["tuning_verdict"]), ("not met", "not met"))
        s = suite.matmul_summary(row("c", 1.0, 1.2, 3.0, ["cublaslt", 1.1], correct=False))
        self.assertEqual(s["verdict"], "not met (wrong results)")
        s = suite.matmul_summary(row("d", 1.0, None, 0.5, ["compile", 0.55], compile_s=18.0, gemms=2))
        self.assertEqual((s["verdict"], s["kfuse_over_cublaslt"]), ("not met", None))
        self.assertEqual((s["compile_s_per_shape"], s["tuning_verdict"]), (9.0, "met"))
        s = suite.matmul_summary(row("e", 1.0, None, 3.0, ["cublaslt", 0.55], compile_s=None))
        self.assertTrue(s["verdict"].startswith("unknown"))
        self.assertEqual(s["tuning_verdict"], "unknown")

    def test_table(self):
        lines = suite.matmul_lines([row("a", 1.0, 1.2, 3.0, ["cublaslt", 1.1]),
                                    row("d", 1.0, None, 0.5, ["compile", 0.55], gemms=2)])
        body = [ln for ln in lines if ln.startswith("| a ") or ln.startswith("| d ")]
        self.assertEqual(len(body), 2)
        header = next(ln for ln in lines if ln.startswith("| case"))
        self.assertEqual(body[0].count("|"), header.count("|"))
        self.assertEqual(body[1].count("|"), header.count("|"))
        self.assertIn("| 1.20x | 3.00x | >= 1.1x cuBLASLt | met |", body[0])
        self.assertIn("| - | 0.50x | >= 0.55x torch.compile | not met |", body[1])
        self.assertIn("Throughput targets met: 1 of 2", lines[-1])

    def test_state_counts_failed_trials(self):
        r = row("a", 1.0, 1.2, 3.0, ["cublaslt", 1.1])
        r.update(state="TUNE_STATE_TUNED", trials=24, tuning_s=8.65, reason="")
        self.assertEqual(suite.state_text(r), "tuned, 24 trials in 8.7 s")
        r["failed_trials"] = {"fault": 2, "wrong_result": 1}
        self.assertEqual(suite.state_text(r),
                         "tuned, 24 trials in 8.7 s, 3 failed (fault 2, wrong_result 1)")
        body = next(ln for ln in suite.matmul_lines([r]) if ln.startswith("| a "))
        self.assertIn("3 failed (fault 2, wrong_result 1)", body)
        # The pointwise and row suites' table too.
        rec = {"GBps": 4000.0, "ms": 0.1}
        b = {"case": "softmax", "bytes": 4e8, "kfuse": rec, "eager": rec, "compile": rec,
             "copy_GBps": 4200.0, "bound": "memory", "tuner_ms": 0.1, "state": "TUNE_STATE_TUNED",
             "variant": "resident=1", "correct": True, "check": "max err 0",
             "failed_trials": {"fault": 1}}
        lines = suite.bandwidth_lines({"GBps": 4200.0}, [b], [])
        body = next(ln for ln in lines if ln.startswith("| softmax"))
        self.assertIn("| tuned, 1 failed (fault 1) | resident=1 |", body)
        # Rows from before the same-bytes copy was measured show "-".
        self.assertIn("| 0.95 | - |", body)

    def test_bandwidth_lines_set_kernels_beside_a_copy_of_their_own_bytes(self):
        rec = {"GBps": 4000.0, "ms": 0.1}
        base = {"case": "rms@32768", "name": "rms", "bytes": 5e8, "kfuse": rec, "eager": rec,
                "compile": rec, "copy_GBps": 4250.0, "copy_same_GBps": 4000.0, "bound": "memory",
                "tuner_ms": 0.1, "state": "TUNE_STATE_TUNED", "variant": "rows=1",
                "correct": True, "check": "max err 0", "failed_trials": {}}
        pt = dict(base, case="rms@20480", kfuse={"GBps": 3880.0, "ms": 0.08},
                  copy_same_GBps=3900.0)
        lines = suite.bandwidth_lines({"GBps": 4250.0}, [base], [{"case": "rms", "points": [pt]}])
        body = next(ln for ln in lines if ln.startswith("| rms@32768"))
        self.assertIn("| 4000 | 0.94 | 1.000 |", body)
        sweep = next(ln for ln in lines if ln.startswith("| rms | 20480"))
        # 3880 / 4000 of the kernel's figure; the copy's 3900 / 4000; 3880 / 3900.
        self.assertIn("| 3880 | 0.970 | 0.975 | 0.995 |", sweep)


# ---------------------------------------------------------------------------
# Attention.

def attention_case(name):
    return next(c for c in suite.all_cases("attention") if c.name == name)


def committed_chain(case, quick):
    with open(case.chain_path(quick)) as f:
        return json.load(f)


def eval_chain(chain, xs):
    """The chain's outputs over torch tensors, float64 where floating: the
    ops kfuse.chain.attention expands to, and nothing else."""
    binary = {"OP_MUL": torch.mul, "OP_SUB": torch.sub, "OP_DIV": torch.div, "OP_LE": torch.le,
              "OP_LT": torch.lt, "OP_EQ": torch.eq, "OP_LOGICAL_AND": torch.logical_and,
              "OP_MATMUL": torch.matmul}
    vals = []
    arg = lambda r: xs[r["input"]] if "input" in r else vals[r["op"]]  # noqa: E731
    for op in chain["ops"]:
        kind, args = op["kind"], [arg(r) for r in op.get("args", [])]
        dims = [int(d["size"]) for d in op.get("shape", {}).get("shape", [])]
        if kind in binary:
            v = binary[kind](*args)
        elif kind == "OP_CONSTANT":
            v = torch.tensor(float(op.get("value", 0.0)), dtype=torch.float64)
        elif kind == "OP_RESHAPE":
            v = args[0].reshape(dims)
        elif kind == "OP_PERMUTE":
            v = args[0].permute(op["permute"]["perm"])
        elif kind == "OP_IOTA":
            axis = op.get("axis", {}).get("axis", 0)
            shape = [1] * len(dims)
            shape[axis] = dims[axis]
            v = torch.arange(dims[axis]).reshape(shape).expand(dims)
        elif kind == "OP_WHERE":
            v = torch.where(*args)
        elif kind == "OP_EXP":
            v = torch.exp(args[0])
        elif kind in ("OP_REDUCE_MAX", "OP_REDUCE_SUM"):
            self_check = op["reduce"]
            assert self_check == {"axes": [-1], "keepdim": True}, self_check
            v = args[0].amax(-1, True) if kind == "OP_REDUCE_MAX" else args[0].sum(-1, True)
        else:
            raise AssertionError(f"op {kind} is not expected in an attention chain")
        vals.append(v)
    return {o["name"]: arg(o["value"]) for o in chain["outputs"]}


ANCHOR_SHAPES = {  # shared/anchors/h200-2026-11-29*.json: (B, H, Hkv, S, D) -> causal variants.
    (4, 32, 32, 4096, 128): {False, True}, (4, 32, 32, 4096, 64): {False, True},
    (16, 32, 32, 1024, 128): {False, True}, (1, 32, 32, 16384, 128): {False, True},
    (4, 32, 8, 4096, 128): {True}}


class AttentionCasesTest(unittest.TestCase):
    def test_timed_cases_are_the_anchor_shapes(self):
        got = {}
        for c in suite.all_cases("attention"):
            if not c.timed:
                continue
            b, h, hkv, sq, sk, d = c.dims(False)
            self.assertEqual(sq, sk, c.name)
            got.setdefault((b, h, hkv, sq, d), set()).add(c.causal)
            self.assertIsNone(c.lengths)
        self.assertEqual(got, ANCHOR_SHAPES)
        lens = [c for c in suite.all_cases("attention") if not c.timed]
        self.assertEqual(len(lens), 1)
        self.assertIn(0, lens[0].lengths)  # A sequence with no keys: rows of zeros.
        self.assertTrue(any(0 < n < lens[0].dims(False)[4] for n in lens[0].lengths))

    def test_flops(self):
        self.assertEqual(suite.attention_flops((4, 32, 32, 4096, 4096, 128), False),
                         4 * 4 * 32 * 4096 * 4096 * 128)
        self.assertEqual(suite.attention_flops((4, 32, 8, 4096, 4096, 128), True),
                         2 * 4 * 32 * 4096 * 4096 * 128)
        self.assertEqual(suite.attention_flops((2, 4, 4, 128, 384, 64), False), 4 * 2 * 4 * 128 * 384 * 64)
        c = attention_case("attn_b1h32s16384d128_causal_bf16")
        self.assertEqual(c.flops(False), 2 * 32 * 16384 * 16384 * 128)
        self.assertEqual(c.flops(True), 2 * 4 * 4096 * 4096 * 128)
        # The anchors' figure for this case: 334.4 TFLOP/s at 6.576 ms.
        self.assertAlmostEqual(c.flops(False) / 6.576e-3 / 1e12, 334.4, delta=0.1)

    def test_bad_cases_are_refused(self):
        with self.assertRaisesRegex(ValueError, "kv heads"):
            suite.AttentionCase("x", (1, 6, 4, 8, 8, 16), (1, 6, 4, 8, 8, 16), False)
        with self.assertRaisesRegex(ValueError, "lengths"):
            suite.AttentionCase("x", (2, 4, 4, 8, 8, 16), (2, 4, 4, 8, 8, 16), False, lengths=(3,))

    def test_committed_chains_match_the_cases(self):
        for quick in (False, True):
            for c in suite.all_cases("attention"):
                chain = committed_chain(c, quick)
                specs = c.specs(quick)
                self.assertEqual([(t["name"], t["dtype"], [int(d["size"]) for d in t["shape"]])
                                  for t in chain["inputs"]],
                                 [(n, suite.WIRE_DTYPE[dt], s) for n, dt, s, _ in specs], c.name)
                self.assertEqual([o["name"] for o in chain["outputs"]], ["out"])
                kinds = [op["kind"] for op in chain["ops"]]
                self.assertEqual(kinds.count("OP_MATMUL"), 2, c.name)
                self.assertEqual("OP_LE" in kinds, c.causal, c.name)
                self.assertEqual("OP_LT" in kinds, c.lengths is not None, c.name)
                d = c.dims(quick)[5]
                consts = [float(op.get("value", 0)) for op in chain["ops"] if op["kind"] == "OP_CONSTANT"]
                self.assertIn(1 / d ** 0.5, consts, c.name)
                # Grouped heads as [B, Hkv, G, S, D] views.
                b, h, hkv, sq, _, d = c.dims(quick)
                views = [[int(x["size"]) for x in op["shape"]["shape"]] for op in chain["ops"]
                         if op["kind"] == "OP_RESHAPE"]
                self.assertEqual([b, hkv, h // hkv, sq, d] in views, c.grouped(quick), c.name)

    @unittest.skipIf(kfuse is None or not hasattr(kfuse, "attention"), "no kfuse client library")
    def test_committed_chains_are_what_make_cases_builds(self):
        for quick in (False, True):
            for c in suite.all_cases("attention"):
                self.assertEqual(make_cases.build(c, quick), committed_chain(c, quick),
                                 f"{c.name} is stale: run make_cases.py")

    def test_write_cases_copies_the_committed_chains(self):
        for quick in (False, True):
            with tempfile.TemporaryDirectory() as d:
                suite.write_cases(d, quick)
                names = sorted(os.listdir(os.path.join(d, "attention")))
                cases = suite.all_cases("attention")
                self.assertEqual(names, sorted(c.name + ".json" for c in cases))
                for c in cases:
                    with open(os.path.join(d, "attention", c.name + ".json")) as f:
                        self.assertEqual(json.load(f), committed_chain(c, quick))

    def test_samples(self):
        dims = (4, 32, 32, 4096, 4096, 128)
        s = suite.attention_samples(dims, 7, pairs=8, rows=64)
        self.assertEqual(len(s), 8)
        self.assertEqual(len({(b, h) for b, h, _ in s}), 8)
        for b, h, rows in s:
            self.assertTrue(0 <= b < 4 and 0 <= h < 32)
            self.assertEqual(len(rows), 64)
            self.assertEqual(len(set(rows)), 64)
            self.assertEqual((rows[0], rows[-1]), (0, 4095))
            self.assertEqual(rows, sorted(rows))
        self.assertEqual(s, suite.attention_samples(dims, 7, pairs=8, rows=64))
        self.assertNotEqual(s, suite.attention_samples(dims, 8, pairs=8, rows=64))
        every = suite.attention_samples((4, 8, 2, 256, 384, 64), 1, None, None)
        self.assertEqual([(b, h) for b, h, _ in every], [(b, h) for b in range(4) for h in range(8)])
        self.assertTrue(all(rows == list(range(256)) for _, _, rows in every))
        few = suite.attention_samples((1, 2, 2, 16, 16, 8), 1, 8, 64)
        self.assertEqual(len(few), 2)
        self.assertEqual(few[0][2], list(range(16)))


@unittest.skipIf(torch is None, "no torch")
class AttentionNumericsTest(unittest.TestCase):
    def inputs(self, case, quick, seed, dtype=None):
        dtype = dtype or torch.bfloat16
        g = torch.Generator().manual_seed(seed)
        out = []
        for _, dt, shape, domain in case.specs(quick):
            if isinstance(domain, tuple):
                out.append(torch.tensor(domain, dtype=torch.int32))
            else:
                out.append(torch.randn(shape, generator=g).to(dtype))
        return out

    def test_lengths_chain_computes_the_reference(self):
        c = attention_case("attn_lengths_b4h8kv2q256k384d64_bf16")
        xs = self.inputs(c, False, 5)
        got = eval_chain(committed_chain(c, False), [x.double() if x.is_floating_point() else x
                                                      for x in xs])["out"]
        self.assertEqual(list(got.shape), [4, 8, 256, 64])
        samples = suite.attention_samples(c.dims(False), 3, *c.sample)
        ref, math_out, empty = suite.attention_expected(torch, F, c, False, xs, samples)
        self.assertTrue(torch.allclose(suite.attention_gather(torch, got, samples), ref,
                                       rtol=1e-10, atol=1e-12))
        # Batch 2 has no keys: its rows are the empty ones, and zeros.
        self.assertEqual(int(empty.sum()), 8 * 256)
        self.assertEqual(got[2].abs().max().item(), 0.0)
        self.assertGreater(got[3].abs().min().item(), 0.0)
        # Batch 3 sees its first 77 keys only: changing the rest changes nothing.
        xs2 = [x.clone() for x in xs]
        xs2[1][3, :, 77:] = 9.0
        xs2[2][3, :, 77:] = -9.0
        got2 = eval_chain(committed_chain(c, False), [x.double() if x.is_floating_point() else x
                                                       for x in xs2])["out"]
        self.assertTrue(torch.equal(got2[3], got[3]))
        # The math backend is close to float64 (it is the yardstick, not the truth).
        self.assertLess((math_out.double() - ref).abs().max().item(), 0.02)

    @unittest.skipIf(kfuse is None or not hasattr(kfuse, "attention"), "no kfuse client library")
    def test_causal_grouped_chain_computes_what_sdpa_computes(self):
        c = suite.AttentionCase("t", (2, 8, 2, 40, 40, 16), (2, 8, 2, 40, 40, 16), causal=True)
        q, k, v = [x.double() for x in self.inputs(c, False, 11)]
        got = eval_chain(make_cases.build(c, False), [q, k, v])["out"]
        want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        self.assertTrue(torch.allclose(got, want, rtol=1e-10, atol=1e-12))
        samples = suite.attention_samples(c.dims(False), 2, 4, 8)
        ref, _, empty = suite.attention_expected(torch, F, c, False, [q, k, v], samples)
        self.assertFalse(empty.any())
        self.assertTrue(torch.allclose(suite.attention_gather(torch, want, samples), ref,
                                       rtol=1e-10, atol=1e-12))

    def test_unfused_computes_what_sdpa_computes(self):
        for causal, heads in ((False, (4, 4)), (True, (4, 4)), (True, (8, 2))):
            c = suite.AttentionCase("t", (2, heads[0], heads[1], 48, 48, 32),
                                    (1, 1, 1, 1, 1, 1), causal=causal)
            q, k, v = self.inputs(c, False, 13, torch.float32)
            got = suite.attention_unfused(torch, c, False, device="cpu")(q, k, v)
            want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                  is_causal=causal, enable_gqa=heads[0] != heads[1])
            self.assertEqual(got.shape, want.shape)
            self.assertLess((got.double() - want).abs().max().item(), 1e-5, (causal, heads))

    def flash_like(self, case, xs, samples):
        """A fused kernel's numerics: f32 scores, P rounded to bf16 before P V,
        the output rounded to bf16."""
        _, h, hkv, _, sk, d = case.dims(False)
        lengths = xs[3].tolist() if len(xs) > 3 else None
        outs = []
        for b, hq, rows in samples:
            hk = hq // (h // hkv)
            allowed = suite.attention_allowed(torch, rows, sk, case.causal,
                                              None if lengths is None else lengths[b], "cpu")
            s = (xs[0][b, hq, rows].float() @ xs[1][b, hk].float().T) / d ** 0.5
            s = s.masked_fill(~allowed, -float("inf"))
            m = s.amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0)
            e = torch.exp(s - m)
            z = e.sum(-1, keepdim=True)
            o = (e.bfloat16().float() @ xs[2][b, hk].float()) / torch.where(z > 0, z, torch.ones_like(z))
            outs.append(o.bfloat16())
        return torch.cat(outs)

    def test_verdict(self):
        c = attention_case("attn_lengths_b4h8kv2q256k384d64_bf16")
        xs = self.inputs(c, False, 17)
        samples = suite.attention_samples(c.dims(False), 4, 6, 32)
        samples.append((2, 5, [0, 100, 255]))  # The sequence of length 0.
        ref, math_out, empty = suite.attention_expected(torch, F, c, False, xs, samples)
        self.assertEqual(int(empty.sum()), 3 + sum(len(r) for b, _, r in samples[:-1] if b == 2))
        good = self.flash_like(c, xs, samples)
        ok, msg = suite.attention_verdict(torch, good, ref, math_out, empty)
        self.assertTrue(ok, msg)
        self.assertIn("SDPA math", msg)
        self.assertIn(f"on {good.shape[0]} rows", msg)

        wrong = good.clone()
        i = int((~empty).nonzero()[5])
        wrong[i, 3] += 16 * 2 ** -7 * ref.abs().max().item()
        self.assertFalse(suite.attention_verdict(torch, wrong, ref, math_out, empty)[0])
        unwritten = good.clone()
        unwritten[i] = float("nan")
        self.assertFalse(suite.attention_verdict(torch, unwritten, ref, math_out, empty)[0])
        stray = good.clone()
        stray[-1, 0] = 1e-3  # A row with no key must be exactly zero.
        ok, msg = suite.attention_verdict(torch, stray, ref, math_out, empty)
        self.assertFalse(ok)
        self.assertIn("1 nonzero", msg)
        nan_row = good.clone()
        nan_row[-2] = float("nan")  # 0/0 where the row has no key.
        self.assertFalse(suite.attention_verdict(torch, nan_row, ref, math_out, empty)[0])


def attn_row(case="a", kfuse_ms=1.0, flash_ms=1.0, default_ms=0.6, correct=True, timed=True,
             kfuse_error="", dims=(4, 32, 32, 4096, 4096, 128), causal=False, lengths=None):
    flops = suite.attention_flops(dims, causal)
    rec = lambda ms: ms and {"ms": ms, "TFLOPs": flops / ms / 1e9}  # noqa: E731
    return {"case": case, "name": case, "dims": list(dims), "causal": causal, "lengths": lengths,
            "timed": timed, "flops": flops, "bytes": 1, "target": ["flash", 0.9],
            "state": "TUNE_STATE_TUNED", "reason": "", "trials": 30, "tuning_s": 7.5,
            "compile_s": 12.0, "kernels": 1, "variant": "bq=128", "correct": correct,
            "check": (f"no kfuse kernel: {kfuse_error}" if kfuse_error else
                      "max err 0.001 (SDPA math 0.0005, tol 0.002) on 512 rows"),
            "kfuse_error": kfuse_error, "kfuse": rec(kfuse_ms) if timed else None,
            "flash": rec(flash_ms) if timed else None, "default": rec(default_ms) if timed else None,
            "eager": rec(20.0) if timed else None, "compile": rec(8.0) if timed else None,
            "skipped": {}}


class AttentionVerdictTest(unittest.TestCase):
    def test_targets(self):
        s = suite.attention_summary(attn_row(kfuse_ms=1.0, flash_ms=0.95))
        self.assertAlmostEqual(s["kfuse_over_flash"], 0.95)
        self.assertEqual(s["verdict"], "met")
        self.assertEqual(s["target"], "0.9x SDPA flash")
        self.assertAlmostEqual(s["kfuse_TFLOPs"], 4 * 4 * 32 * 4096 ** 2 * 128 / 1e9, places=3)  # 1 ms.
        s = suite.attention_summary(attn_row(kfuse_ms=1.0, flash_ms=0.85))
        self.assertEqual(s["verdict"], "not met")
        s = suite.attention_summary(attn_row(kfuse_ms=0.5, flash_ms=1.0, correct=False))
        self.assertEqual(s["verdict"], "not met (wrong results)")
        s = suite.attention_summary(attn_row(kfuse_ms=None, kfuse_error="no manifest"))
        self.assertEqual((s["verdict"], s["kfuse_over_flash"]), ("not met (no kfuse kernel)", None))
        self.assertIsNotNone(s["flash_TFLOPs"])
        s = suite.attention_summary(attn_row(kfuse_ms=1.0, flash_ms=None))
        self.assertTrue(s["verdict"].startswith("unknown"))
        s = suite.attention_summary(attn_row(timed=False, lengths=[384, 300, 0, 77]))
        self.assertEqual(s["verdict"], "correctness only")

    def test_table(self):
        rows = [attn_row("a", 1.0, 0.95), attn_row("b", 1.0, 0.5, causal=True),
                attn_row("c", None, 1.0, kfuse_error="no manifest", correct=False),
                attn_row("d", timed=False, dims=(4, 8, 2, 256, 384, 64), lengths=[384, 300, 0, 77])]
        rows[2]["skipped"]["eager"] = "needs about 103 GiB, 90 GiB free"
        lines = suite.attention_lines(rows)
        self.assertIn("halved for causal", lines[0])
        header = next(ln for ln in lines if ln.startswith("| case"))
        body = {ln.split(" | ")[0][2:]: ln for ln in lines if ln.startswith("| ") and
                ln.split(" | ")[0][2:] in "abcd"}
        self.assertEqual(sorted(body), ["a", "b", "c", "d"])
        for ln in body.values():
            self.assertEqual(ln.count("|"), header.count("|"), ln)
        self.assertIn("| 4 x 32 x 4096 x 4096 x 128 | - |", body["a"])
        self.assertIn("| 0.95x | >= 0.9x SDPA flash | met |", body["a"])
        self.assertIn("| causal |", body["b"])
        self.assertIn("| 0.50x | >= 0.9x SDPA flash | not met |", body["b"])
        self.assertIn("| - | 1099.5 |", body["c"])  # No kfuse figure; SDPA flash's.
        self.assertIn("WRONG: no kfuse kernel: no manifest", body["c"])
        self.assertIn("not met (no kfuse kernel)", body["c"])
        self.assertIn("eager (needs about 103 GiB", body["c"])
        self.assertIn("| 4 x 8/2 x 256 x 384 x 64 | lengths 384,300,0,77 |", body["d"])
        self.assertIn("| - | correctness only |", body["d"])
        self.assertEqual(lines[-1], "Throughput targets met: 1 of 3 timed cases (kfuse >= 0.9x SDPA "
                         "flash); correct: 3 of 4 cases.")


if __name__ == "__main__":
    unittest.main()
