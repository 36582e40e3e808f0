#!/bin/bash
# run142: GpuRowTest (every variant of every row chain against fp64) on
# row/13 as committed.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 330 $b/bin/kfuse_cross_test --gtest_filter="GpuRow*" > $OUT/gpu_tests.log 2>&1
echo "GpuRowTest rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -10
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -30
