#!/bin/bash
# run187: after this stop's changes (whole constants past i32, attention's
# fallback and report, the store's schema 3 and recovery, LookupOrMiss),
# on the H200, side by side:
# (1) what eager PyTorch does with the scalars the validator now refuses
#     or types (a Python int past i32 beside i32 and bool tensors, a Python
#     float past f32), to check the messages' claims;
# (2) the kernel suites against fp64 on fresh inputs (row, reduce,
#     attention, chains and layouts, matmul), kfuse_cuda_test,
#     kfuse_client_test, and the Python client's tests with torch.
# Made here: build/gpu-run187 (bench/gpu/prepare.sh, then kfuse_tuner_test
# and kfuse-plan-manifest removed to fit the carry); .gpu/pysite (pip
# install --no-deps --target .gpu/pysite ./clients/python).
b=$PWD/build/gpu-run187
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 - > $OUT/torch_scalars.txt 2>&1 <<'PY'
import torch
print("torch", torch.__version__)
i32 = torch.tensor([1, 2147483647], dtype=torch.int32, device="cuda")
b = torch.tensor([True, False], device="cuda")
f = torch.tensor([1.0, 2.0], device="cuda")
cases = {
    "i32 + 2**31": lambda: i32 + 2**31,
    "i32 != 2**31": lambda: i32 != 2**31,
    "i32 * -10**12": lambda: i32 * -10**12,
    "where(b, i32, 2**31)": lambda: torch.where(b, i32, 2**31),
    "i32 / 2**31": lambda: i32 / 2**31,
    "bool + 2**31": lambda: b + 2**31,
    "f32 + 2**31": lambda: f + 2**31,
    "f32 + 1e300": lambda: f + 1e300,
    "f32 * 10**300": lambda: f * 10**300,
    "bf16 + 1e300": lambda: f.bfloat16() + 1e300,
}
for name, fn in cases.items():
    try:
        r = fn()
        print(f"{name:24s} -> {r.dtype} {r.tolist()}")
    except Exception as e:
        print(f"{name:24s} -> {type(e).__name__}: {str(e).splitlines()[0]}")
PY
cat $OUT/torch_scalars.txt
x=$b/bin/kfuse_cross_test
timeout 560 $x --gtest_filter='GpuRowTest.*' > $OUT/row.txt 2>&1 & p1=$!
( timeout 300 $x --gtest_filter='GpuReduceTest.*' > $OUT/reduce.txt 2>&1
  timeout 250 $x --gtest_filter='GpuAttentionTest.*' > $OUT/attention.txt 2>&1 ) & p2=$!
( timeout 150 $x --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*:GpuReduceChainsTest.*' > $OUT/chains.txt 2>&1
  timeout 270 $x --gtest_filter='GpuMatmulTest.*' > $OUT/matmul.txt 2>&1 ) & p3=$!
$b/bin/kfuse_cuda_test > $OUT/cuda_test.txt 2>&1; echo "cuda_test rc=$?"; tail -1 $OUT/cuda_test.txt
$b/bin/kfuse_client_test --gtest_filter='ClientTest.*' > $OUT/client_test.txt 2>&1; echo "client_test rc=$?"; tail -1 $OUT/client_test.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -4 $OUT/python_tests.txt
wait $p3; echo "chains+matmul rc=$?"; grep -hE "^\[ +(FAILED|PASSED)" $OUT/chains.txt $OUT/matmul.txt
wait $p2; echo "reduce+attention rc=$?"; grep -hE "^\[ +(FAILED|PASSED)" $OUT/reduce.txt $OUT/attention.txt
wait $p1; echo "row rc=$?"; grep -E "^\[ +(FAILED|PASSED)" $OUT/row.txt
