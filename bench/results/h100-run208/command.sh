#!/bin/bash
# run208: why run207's GpuReduceTest failed one plan of
# row_min_beside_totals_f32 (kernel 1 at resident=0, rows=1, threads=256,
# vec=1: the total sum 6.23e-4 from fp64 against a tolerance of 5.86e-4):
# the case alone, with every run's error on every output
# (KFUSE_GPU_VERBOSE), its inputs as in run207 (a case's seed is now its
# place in the list, whatever the filter).
# Ran on an NVIDIA H100 (80 GB HBM3): failed as run207 (6.23e-4); every
# plan with the heuristic's first kernel at 5.0-6.2e-4, other first kernels
# 1.3e-5 to 3.8e-4 (gpu_tests.txt).
# Made here: build/gpu-run208.tar.xz (kfuse_cross_test, stripped, and the
# libraries bench/gpu/prepare.sh bundles), built from the working tree
# that adds KFUSE_GPU_VERBOSE.
mkdir -p /tmp/k && xz -dc build/gpu-run208.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run208
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/device.txt
start=$SECONDS
KFUSE_GPU_VERBOSE=1 KFUSE_GPU_CASES=row_min_beside_totals_f32 timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/gpu_tests.txt 2>&1
echo "rc $? $((SECONDS - start)) s" >> $OUT/gpu_tests.txt
grep "output 1" $OUT/gpu_tests.txt | sort -t' ' -k1,1 | head -80
tail -3 $OUT/gpu_tests.txt
