#!/bin/bash
# matmul/3: few rows stream B straight to registers. Every variant against
# the reference (GpuMatmulTest), then the few-row cases of the matmul suite,
# then the wide-row softmax program.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $?"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head -30
CASES=gemm_bias_gelu_m1_bf16,gemm_bias_gelu_m16_bf16,gemm_bias_gelu_m64_bf16 SUITES=matmul SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=200 bash bench/gpu/run.sh $b 2>&1 | grep -vE '^\{"case"' | tail -12
w=$(ls -dt /tmp/kfuse-bench.* | head -1)
cp $w/plans/*.txt $OUT/ 2>/dev/null; cp bench/results/*-matmul.md bench/results/*-matmul.json $OUT/ 2>/dev/null
if [ -f .gpu/softmax_wide/READY ]; then
  timeout 100 .gpu/softmax_wide/softmax_wide_bench >$OUT/softmax_wide.txt 2>&1
  echo "softmax_wide rc $?"; tail -12 $OUT/softmax_wide.txt
fi
