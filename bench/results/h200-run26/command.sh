#!/bin/bash
# Row family after the instruction cuts (hardware bf16 rounding, max.NaN,
# ex2.approx.ftz, one rescale per vector in the online softmax): every variant
# against fp64, then the whole row suite.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=build/gpu-bundle
echo "== GpuRowTest"
start=$SECONDS
timeout 220 $b/bin/kfuse_cross_test --gtest_filter='GpuRow*' 2>&1 | grep -vE '^\[ RUN|^\[       OK' | tail -30 | tee $OUT/gpu_row_test.txt
echo "GpuRowTest wall $((SECONDS - start)) s"
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=$((575 - SECONDS)) bash bench/gpu/run.sh build/gpu-bundle
