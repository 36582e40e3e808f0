#!/bin/bash
# run228: at 9e9ffd8 (a Python int outside i32 beside i64 is an i64 of its
# exact value): GpuChainsTest.I64ChainsMatchTheEvaluatorExactly with its
# 2^40 + 1 addend, GpuChainsTest's random chains, and the Python client's
# tests with torch on the GPU against this kfused (the int64 ones among them).
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run228.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run228.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run228
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
$b/bin/kfuse_cross_test --gtest_filter='GpuChainsTest.*:I64*' > $OUT/gpu_chains.txt 2>&1; echo "cross rc=$?" >> $OUT/gpu_chains.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?" >> $OUT/python_tests.txt
grep -E "out8|^\[ +(FAILED|PASSED|OK) |Failure|rc=" $OUT/gpu_chains.txt | tail -12
tail -3 $OUT/python_tests.txt
echo "total $((SECONDS - start)) s"
