#!/bin/bash
# matmul/5 restricted to tiles of at most 64 rows: GpuMatmulTest, every
# matmul space variant against fp64 on fresh random inputs.
# The hint restricted to tiles of at most 64 rows: GpuMatmulTest stopped
# at matmul{bk=64,bm=16,bn=128,group=1,splitk=16,stages=4,wm=1,wn=4} on
# few_rows_bf16_splitk (715). matmul/5 was reverted (matmul/6).
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 320 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head
grep -B2 -A8 Failure $OUT/gpu_matmul_test.txt | head -40
