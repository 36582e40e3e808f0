#!/bin/bash
# run173: GpuRowTest with row/14 as committed: the online pass's f32 lane
# sums compensated only past 64 terms a lane (run172), the near-uniform
# softmax at W = 1001 and 50257 among the chains.
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 450 $b/bin/kfuse_cross_test --gtest_filter="GpuRow*" > $OUT/gpu_row.log 2>&1
echo "GpuRowTest rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|PASSED" $OUT/gpu_row.log | tail -6
grep -B2 -A12 "Failure" $OUT/gpu_row.log | head -40
