#!/bin/bash
# row/5 with whole-vector stores (kf_stv): the generated bulk kernel alone,
# GpuRowTest, then the whole row suite (.gpu/bulk/b built as in
# h200-run54/command.sh from the golden source of the time).
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
(cd .gpu/bulk && ./b 2670 && ./b 4096) 2>&1 | tee $OUT/standalone.txt
timeout 230 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head -20
grep -B2 -A6 Failure $OUT/gpu_row_test.txt | head -40
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=250 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
