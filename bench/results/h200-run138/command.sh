#!/bin/bash
# GpuReduceTest with the 50257-wide NLL of log-probabilities (its pick the
# row kernel's only reduction, bulk and split variants among its space).
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 280 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -20
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -60
echo "total $((SECONDS - start)) s"
