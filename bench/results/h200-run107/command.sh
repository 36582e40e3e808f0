#!/bin/bash
# row/11: bulk-staged rows take their rows from a counter (dyn=1).
# GpuRowTest (every variant, bulk ones also on two and three blocks),
# then the row suite.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 400 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head
grep -B2 -A10 Failure $OUT/gpu_row_test.txt | head -30
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=170 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
echo "faults: $(grep -c 'what=fault' $OUT/kfused.log)"
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
