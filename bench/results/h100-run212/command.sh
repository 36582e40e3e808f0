#!/bin/bash
# run212: row/16 (i32 row sums add as unsigned; every row kernel's team
# reduction gains kf_sum_op's int overload) at 3c150f2: GpuRowTest (every
# row variant of every case against fp64) beside GpuReduceTest's i32 row
# sums, the twin cases and the rest of its cases, and GpuReduceChainsTest.
# Made here: build/gpu-run212.tar.xz (kfuse_cross_test, stripped, and the
# libraries bench/gpu/prepare.sh bundles).
mkdir -p /tmp/k && xz -dc build/gpu-run212.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run212
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
( timeout 420 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_reduce.txt 2>&1
  echo "GpuReduceTest, GpuReduceChainsTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
( timeout 500 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest.*' > $OUT/gpu_row.txt 2>&1
  echo "GpuRowTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_row.txt ) &
wait
for f in gpu_reduce gpu_row; do tail -1 $OUT/$f.txt; grep -E "^\[  (FAILED|PASSED) |Failure" -A3 $OUT/$f.txt | head -12; done
grep -E '^(int_row_sum|sum_normalized)' $OUT/gpu_reduce.txt
grep -cE '^[a-z0-9_]+: [0-9]+ kernels' $OUT/gpu_reduce.txt
