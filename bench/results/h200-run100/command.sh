#!/bin/bash
# row/10 (f32 x * r * w rounded once by kf_mul3): GpuRowTest (every variant
# against fp64, and kf_mul3 on special and random factors); then the
# cluster-split bulk-staged softmax trial beside row/5's schedule.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
if [ -x .gpu/softmax_wide/softmax_wide_bench ]; then
  bash .gpu/softmax_wide/run.sh
  grep -E "copy reference|clt|clu|dbuf|rowcopy_tma|memcpy" $OUT/softmax_wide.txt | head -60
  echo "trial $((SECONDS - start)) s"
fi
timeout 400 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head
grep -B2 -A10 Failure $OUT/gpu_row_test.txt | head -40
echo "total $((SECONDS - start)) s"
