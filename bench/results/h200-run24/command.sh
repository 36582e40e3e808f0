#!/bin/bash
# Row family row/3 (resident=3: rows pipelined through shared memory with cp.async).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=build/gpu-bundle
echo "== GpuRowTest"
start=$SECONDS
timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuRow*' 2>&1 | grep -vE '^\[ RUN|^\[       OK' | tail -30 | tee $OUT/gpu_row_test.txt
echo "GpuRowTest wall $((SECONDS - start)) s"
SUITES=row CASES=softmax_bf16_1024,softmax_bf16_4096,softmax_bf16_5120,softmax_bf16_8192,softmax_bf16_50257,layer_norm_bf16_1024,layer_norm_bf16_4096,layer_norm_bf16_5120,layer_norm_bf16_8192,rms_norm_bf16_1024,rms_norm_bf16_4096,rms_norm_bf16_8192,add_rms_norm_bf16_4096,softmax_f32_50257 \
  BUDGET=6 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=$((560 - SECONDS)) bash bench/gpu/run.sh build/gpu-bundle
