#!/bin/bash
# Team reductions of several warps by a butterfly over the warps' slots
# (fewer instructions a thread than a serial read of every slot): every
# variant against fp64, then the cases with the largest teams.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=build/gpu-bundle
start=$SECONDS
timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuRow*' 2>&1 | grep -vE '^\[ RUN|^\[       OK' | tail -30 > $OUT/gpu_row_test.txt
tail -3 $OUT/gpu_row_test.txt; echo "GpuRowTest wall $((SECONDS - start)) s"
SUITES=row CASES=layer_norm_f32_4096,rms_norm_f32_4096,rms_norm_f32_8192,layer_norm_f32_8192,rms_norm_bf16_8192,layer_norm_bf16_8192,softmax_bf16_4096,add_rms_norm_f32_4096 \
  BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=170 bash bench/gpu/run.sh build/gpu-bundle > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
