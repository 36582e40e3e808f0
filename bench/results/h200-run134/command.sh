#!/bin/bash
# row/12 (16-bit sums uncompensated; a reduction repeating another of its
# phase but for keepdim shares its accumulator): GpuRowTest (every variant of
# every row chain against fp64; GpuReduceTest passed in run133), then the
# cross-entropy with labels beside the 50257-wide bf16 softmax and two bf16
# norms in one suite run.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 320 $b/bin/kfuse_cross_test --gtest_filter="GpuRow*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -20
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -60
CASES=cross_entropy_bf16,softmax_bf16_50257,rms_norm_bf16_8192,layer_norm_bf16_8192 SUITES="reduce row" BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=210 bash bench/gpu/run.sh $b > $OUT/bench_run.log 2>&1
echo "suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG|rror" $OUT/bench_run.log | head
grep -E '^\| [a-z]' $OUT/bench_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
