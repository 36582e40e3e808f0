#!/bin/bash
# run209: f32 sums a row kernel writes as they are (outputs, or row results
# a later kernel sums) accumulate in double where they are not compensated
# (run208: the register-resident rows' float partials put a staged total at
# 2.6x eager's error). First row_min_beside_totals_f32 alone with every
# run's error (run208's inputs); then at once every GpuReduceTest case with
# GpuReduceChainsTest, and GpuRowTest (every row variant against fp64).
# Ran on an NVIDIA H100 (80 GB HBM3), the working tree of row/15 before its
# version bump (the kernels differ from row/15's in their version line
# only): the total's plans at 1.3e-5 to 3.2e-4 (the heuristic's 1.96e-4,
# eager's); GpuReduce* (29 cases) 276 s and GpuRowTest 405 s passed.
# Made here: build/gpu-run209.tar.xz (kfuse_cross_test, stripped, and the
# libraries bench/gpu/prepare.sh bundles).
mkdir -p /tmp/k && xz -dc build/gpu-run209.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run209
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/device.txt
start=$SECONDS
KFUSE_GPU_VERBOSE=1 KFUSE_GPU_CASES=row_min_beside_totals_f32 timeout 100 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/totals.txt 2>&1
echo "rc $? $((SECONDS - start)) s" >> $OUT/totals.txt
( timeout 400 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_reduce.txt 2>&1
  echo "GpuReduceTest, GpuReduceChainsTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
( timeout 450 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest.*' > $OUT/gpu_row.txt 2>&1
  echo "GpuRowTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_row.txt ) &
wait
grep "output 1" $OUT/totals.txt | awk '{print $2, $3, $8}' | sort | uniq -c | sort -k4 -g | tail -8
tail -1 $OUT/totals.txt
for f in gpu_reduce gpu_row; do tail -1 $OUT/$f.txt; grep -E "^\[  (FAILED|PASSED) |Failure" $OUT/$f.txt | head -5; done
grep -cE '^[a-z0-9_]+: [0-9]+ kernels' $OUT/gpu_reduce.txt
