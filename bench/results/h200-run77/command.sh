#!/bin/bash
# matmul/6 (matmul/5 reverted: matmul/4's kernels): GpuMatmulTest, every
# matmul space variant against fp64 on fresh random inputs.
# The final tree (matmul/6: matmul/4's kernels): passed.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 320 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head
grep -B2 -A8 Failure $OUT/gpu_matmul_test.txt | head -40
