#!/bin/bash
# row/6: f32 bulk softmax keeps exp(x - max) over its staged row.
# (1) the 50257-wide kernels side by side (.gpu/sp/main1.cu): row/5's F0,
# row/6's F6 (the heuristic's 512 threads), F7 (1024), F8 (256), bf16 B0
# unchanged, cudaMemcpy; both flushes. (2) GpuRowTest, now with f32
# softmax and f32 softmax under a mask shared by all rows.
cd "$(dirname "$0")/.."
(cd .gpu/sp && timeout 120 ./sp1 2670; FLUSH_WRITE=1 timeout 120 ./sp1 2670) 2>&1 | tee $OUT/keep.txt
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 420 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head
grep -B2 -A10 Failure $OUT/gpu_row_test.txt | head -40
