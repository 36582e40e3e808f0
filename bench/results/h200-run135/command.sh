#!/bin/bash
# Picks: a row's element at a per-row column (sum(where(iota == label, x, 0)))
# read once a row instead of compared at every column, so the cross-entropy's
# max and sum of exps are one online pass: GpuReduceTest (every variant of
# every kernel of twenty-one plans against fp64, the NLL of log-probabilities
# new), then the cross-entropy beside the soft-target loss.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 240 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -20
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -60
CASES=cross_entropy_bf16,soft_target_loss_bf16 SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=150 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG|rror" $OUT/reduce_run.log | head
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
