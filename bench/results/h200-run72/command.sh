#!/bin/bash
# Looped row kernels with weights evict-last (row/6) and plain (row/5) at
# the widths where the suite's tuner picked differently (.gpu/rows/w6),
# after both flushes; then GpuMatmulTest: every matmul space variant (the
# few-row tiles now copy B evict-first) against fp64 on fresh random inputs.
# w6.txt: looped kernels with weights evict-last (_new, row/6) and plain
# (_old), made as in h200-run70. GpuMatmulTest stopped at its first variant
# with CUDA_ERROR_ILLEGAL_INSTRUCTION (715): matmul/5's hinted copies.
cd "$(dirname "$0")/.."
(cd .gpu/rows && timeout 100 ./w6; FLUSH_WRITE=1 timeout 100 ./w6) 2>&1 | tee $OUT/w6.txt
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 300 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head
grep -B2 -A8 Failure $OUT/gpu_matmul_test.txt | head -40
