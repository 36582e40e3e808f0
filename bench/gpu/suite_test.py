#!/usr/bin/env python3
"""Tests of suite.py that need no GPU: the matmul cases' chain JSON (it
parses as kfuse.v1.Chain and computes what the eager function computes),
the launcher's binding of a two-kernel plan (one intermediate
shared by writer and reader, workspaces zeroed before each launch) over a
fake driver, and the matmul verdicts.

  python3 bench/gpu/suite_test.py            # torch / kfuse-stub tests skip without them
  build-torch/venv/bin/python bench/gpu/suite_test.py
"""
import ctypes
import json
import os
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite  # noqa: E402

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
            self.assertEqual(len(cases), 6)
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
               "OP_GELU_TANH": lambda a: F.gelu(a, approximate="tanh")}
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


class FakeTensor:
    def __init__(self, log, nbytes, ptr):
        self.log, self.nbytes, self.ptr = log, nbytes, ptr

    def data_ptr(self):
        return self.ptr

    def zero_(self):
        self.log.append(("zero", self.ptr))


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
        # The zeroed workspace, before each k0 launch; the other never.
        self.assertEqual([e for e in log if e[0] == "zero"], [("zero", k0[6])] * 2)
        self.assertEqual(log.index(("zero", k0[6])), 0)
        self.assertEqual(log[log.index(launches[1]) + 1], ("zero", k0[6]))

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


if __name__ == "__main__":
    unittest.main()
