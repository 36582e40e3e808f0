#!/bin/bash
# Not run yet (written at f38fc6d; run it at the HEAD of the day it runs).
# run206: the staged plans changed today on the GPU (the random
# reduce chains of run203 reach neither): GpuReduceTest's cases whose names
# hold "beside" (a row min beside the sum and min over every axis, keepdim
# and not: one row kernel stores both row results; column sums beside a
# [N, 1] output: a pointwise kernel each after the reduction; and the
# earlier column sum beside a row softmax), every variant of every kernel
# against fp64; then GpuMatmulTest's plans again at this commit.
# Made here: build/gpu-run206.tar.xz (bench/gpu/prepare.sh's bundle, only
# kfuse_cross_test and the libraries).
mkdir -p /tmp/k && xz -dc build/gpu-run206.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run206
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
KFUSE_GPU_CASES=beside timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*:GpuMatmulTest.Plans*' > $OUT/gpu_tests.txt 2>&1
echo "rc $? $((SECONDS - start)) s" >> $OUT/gpu_tests.txt
grep -E "^\[ +(OK|FAILED|PASSED) |Failure|^rc" $OUT/gpu_tests.txt | head -20
