#!/bin/bash
# run215 (ran on an H100): at 455747b (row/17: f32 sums an output adds accumulate in double),
# kfuse.torch's translation cases on the GPU three times (fresh random
# inputs each), beside every GpuReduceTest and GpuReduceChainsTest case and
# GpuRowTest (every variant of every case against fp64).
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run215.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run215.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run215
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
( timeout 420 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_reduce.txt 2>&1
  echo "GpuReduceTest, GpuReduceChainsTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
( timeout 500 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest.*' > $OUT/gpu_row.txt 2>&1
  echo "GpuRowTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_row.txt ) &
( for i in 1 2 3; do
    KFUSED=$b/bin/kfused PYTHONPATH=$PWD/.gpu/pysite timeout 150 python3 -m pytest -q -s -rs \
      clients/python/tests/test_torch_fuse_gpu.py > $OUT/torch_fuse_gpu_$i.txt 2>&1
    echo "pytest rc=$? $((SECONDS - start)) s" >> $OUT/torch_fuse_gpu_$i.txt
  done ) &
wait
for i in 1 2 3; do tail -n 2 $OUT/torch_fuse_gpu_$i.txt; done
grep -h "^full_reductions" $OUT/torch_fuse_gpu_*.txt
for f in gpu_reduce gpu_row; do tail -n 1 $OUT/$f.txt; grep -E "^\[  (FAILED|PASSED) |Failure" -A3 $OUT/$f.txt | head -12; done
echo "total $((SECONDS - start)) s"
