#!/bin/bash
# run170: GpuRowTest (the long chain now adds its input back each step) (every variant of the row chains at widths 1000-50257
# against fp64), now with a softmax after 80 element-wise ops at W = 1001
# and 50257: the row phases past 64 ops and the accurate sins called out of
# line.
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 560 $b/bin/kfuse_cross_test --gtest_filter="GpuRow*" > $OUT/gpu_row.log 2>&1
echo "GpuRowTest rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|PASSED" $OUT/gpu_row.log | tail -6
grep -B2 -A12 "Failure" $OUT/gpu_row.log | head -40
grep -E "long_chain" $OUT/gpu_row.log | head -12
