#!/bin/bash
# matmul/5 with zero-filled chunks copied plainly (hinted copies take no
# source-size operand): the 64-row tile against the unhinted one after
# both flushes (.gpu/mm/mmb), then GpuMatmulTest: every matmul space
# variant against fp64 on fresh random inputs.
# The hinted copy without a source-size operand (zero-filled chunks
# copied plainly): the 64-row tile kept its gain (44.2 us after the
# memset against 48.6), GpuMatmulTest stopped as in run72.
cd "$(dirname "$0")/.."
echo "== flush by reads"; (cd .gpu/mm && timeout 60 ./mmb) 2>&1 | tee $OUT/mm_read.txt | grep -E "c64|read strips 128"
echo "== flush by writes"; (cd .gpu/mm && FLUSH_WRITE=1 timeout 60 ./mmb) 2>&1 | tee $OUT/mm_write.txt | grep -E "c64|read strips 128"
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 320 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head
grep -B2 -A8 Failure $OUT/gpu_matmul_test.txt | head -40
