#!/bin/bash
# run148: matmul/7 (streamed loads unpredicated where K is whole steps):
# its generated M = 16 kernel beside matmul/6's and the hand edits (the
# harness of h200-run143; g16n.cu is kfuse compile --source of the M = 16
# case with this tree, entry renamed kf_entry_new), twice; then
# GpuMatmulTest (every matmul space variant against fp64).
cd "$(dirname "$0")/.."
for i in 1 2; do (cd .gpu/tma && ONLY_GEN=1 timeout 100 ./tma) 2>&1 | tee -a $OUT/gen.txt | grep -E 'streamed|matmul/7|lean loads  |strips'; done
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 400 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head
grep -B2 -A8 Failure $OUT/gpu_matmul_test.txt | head -40
