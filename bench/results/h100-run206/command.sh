#!/bin/bash
# run206: the staged plans on the GPU (the random reduce chains of run203
# reach neither): GpuReduceTest's cases whose names hold "beside" (a row
# min beside the sum and min over every axis, keepdim and not: one row
# kernel stores both row results; column sums beside a [N, 1] output: a
# pointwise kernel each after the reduction; the column sum beside a row
# softmax; 64 inputs whose row kernel reads their column mean too), every
# variant of every kernel against fp64; then GpuMatmulTest's plans.
# Made here at the commit it runs: build/gpu-run206.tar.xz (kfuse_cross_test,
# stripped, and the libraries bench/gpu/prepare.sh bundles).
mkdir -p /tmp/k && xz -dc build/gpu-run206.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run206
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/device.txt
start=$SECONDS
KFUSE_GPU_CASES=beside timeout 400 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*:GpuMatmulTest.Plans*' > $OUT/gpu_tests.txt 2>&1
echo "rc $? $((SECONDS - start)) s" >> $OUT/gpu_tests.txt
grep -E "^\[ +(OK|FAILED|PASSED) |Failure|^rc" $OUT/gpu_tests.txt | head -20
