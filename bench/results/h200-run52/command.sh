#!/bin/bash
# row/5 again (launch fix: static + dynamic shared memory past 48 KiB):
# GpuRowTest, each 50257-wide softmax's trials, then the whole row suite.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head -20
grep -B2 -A6 Failure $OUT/gpu_row_test.txt | head -40
$b/bin/kfused --address=127.0.0.1:7391 --store=/tmp/trials.db --worker=$b/bin/kfuse-worker >/tmp/kt.log 2>&1 &
pid=$!; sleep 3
for t in bf16 f32; do
  $b/bin/kfuse chain softmax --dtype $t --width 50257 --rows-symbol rows --rows-hint 2670 > /tmp/sm_$t.json
  timeout 60 $b/bin/kfuse --server 127.0.0.1:7391 --timeout 60 tune /tmp/sm_$t.json --mode full --budget 25 > $OUT/trials_$t.txt 2>&1
  grep -E "resident=3|best" $OUT/trials_$t.txt | tail -30
done
kill $pid
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=250 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
