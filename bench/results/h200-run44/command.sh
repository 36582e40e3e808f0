#!/bin/bash
# Tens of rows: 256-column tiles with split K (A read once per 256 columns)
# searched first at M > 16. Every trial of M = 64 (8192 x 8192 weights),
# GpuMatmulTest (every variant, tens of rows included), then the suite's
# three few-rows cases.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7616
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
timeout 90 $b/kfuse --server $addr tune .gpu/gemm_bias_gelu_m64_bf16.json --mode full --budget 40 --force > $OUT/tune_m64.txt 2>&1
grep -E 'tune ' $OUT/tune_m64.txt | sed -E 's/.*(\{[^}]*}) +([0-9.]+ [um]s).*/\2 \1/' | sort -n | head -8
kill $pid
echo "== GpuMatmulTest"
timeout 300 $b/kfuse_cross_test --gtest_filter='GpuMatmulTest.EveryVariant*' 2>&1 | grep -vE "^\[ RUN|^\[       OK" | tail -8 | tee $OUT/gpu_matmul_test.txt
echo "== suite"
SUITES=matmul CASES=gemm_bias_gelu_m1_bf16,gemm_bias_gelu_m16_bf16,gemm_bias_gelu_m64_bf16 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=150 bash bench/gpu/run.sh build/gpu-bundle 2>&1 | grep -E '^\| gemm|targets met'
