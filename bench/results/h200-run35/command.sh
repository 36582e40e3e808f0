#!/bin/bash
# After the review fixes (the last pass reading a row lets it go, split
# variants only on sm_90): every variant against fp64.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 200 build/gpu-bundle/bin/kfuse_cross_test --gtest_filter='GpuRow*' 2>&1 | grep -vE '^\[ RUN|^\[       OK' | tail -30 > $OUT/gpu_row_test.txt
tail -3 $OUT/gpu_row_test.txt; echo "GpuRowTest wall $((SECONDS - start)) s"
