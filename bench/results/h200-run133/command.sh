#!/bin/bash
# row/12 (16-bit sums uncompensated; a reduction repeating another of its
# phase but for keepdim shares its accumulator) and the fp64 yardstick's
# identity casts: GpuRowTest and GpuReduceTest (every variant of every
# kernel against fp64), then kfuse.torch's tests.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 400 $b/bin/kfuse_cross_test --gtest_filter="GpuRow*:GpuReduce*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -20
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -60
KFUSED=$PWD/$b/bin/kfused PYTHONPATH=.gpu/py timeout 100 python3 -m pytest -p no:cacheprovider -q -rs clients/python/tests/test_torch_fuse.py -s > $OUT/python_torch_tests.txt 2>&1
echo "torch tests rc=$? at $((SECONDS - start)) s"
grep -E "passed|failed|FAILED|Error" $OUT/python_torch_tests.txt | tail -15
ls $OUT; echo "total $((SECONDS - start)) s"
