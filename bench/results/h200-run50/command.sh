#!/bin/bash
# matmul/3 (streamed few rows, batches of steps): every variant against the
# reference (GpuMatmulTest), then the whole matmul suite in one run.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $?"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head -20
SUITES=matmul SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=380 bash bench/gpu/run.sh $b 2>&1 | grep -vE '^\{"case"' | tail -14
w=$(ls -dt /tmp/kfuse-bench.* | head -1)
mkdir -p /tmp/res; cp $w/plans/*.txt /tmp/res/ 2>/dev/null
cp bench/results/$(date +%F)-matmul.md bench/results/$(date +%F)-matmul.json /tmp/res/ 2>/dev/null
tar czf $OUT/results.tgz -C /tmp res
ls $OUT
