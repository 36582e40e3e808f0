#!/bin/bash
# Final checks of this tree on the H200: every matmul space variant (the
# cluster twins and wide cluster tiles included) and every row space
# variant (split rows now take the cluster helpers from the prelude)
# against fp64 on fresh random inputs.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 280 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head
timeout 290 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head
grep -B2 -A8 Failure $OUT/gpu_*_test.txt | head -40
