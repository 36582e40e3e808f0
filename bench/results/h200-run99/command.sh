#!/bin/bash
# The peel head of rows past kf_R taken from row 0 (run98's GpuRowTest
# fault: a looped peeled pass, unguarded, loaded misaligned): GpuRowTest.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 375 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head
grep -B2 -A10 Failure $OUT/gpu_row_test.txt | head -30
