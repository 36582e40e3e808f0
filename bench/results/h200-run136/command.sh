#!/bin/bash
# Which schedules the cross-entropy's row kernel runs at: every trial of a
# full tuning (25 s budget) as kfuse tune streams them, then the suite's
# figure with an 8 s budget.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
w=$(mktemp -d)
$b/bin/kfused --address=127.0.0.1:7611 --store=$w/store.db --worker=$PWD/$b/bin/kfuse-worker --gpu_memory_budget=$((48 << 30)) > $OUT/kfused_trials.log 2>&1 &
for _ in $(seq 1 300); do $b/bin/kfuse --server 127.0.0.1:7611 health >/dev/null 2>&1 && break; sleep 0.2; done
timeout 60 $b/bin/kfuse --server 127.0.0.1:7611 tune --mode full --budget 25 bench/gpu/cases/reduce/cross_entropy_bf16.json > $OUT/tune_trials.txt 2>&1
echo "tune rc=$? at $((SECONDS - start)) s"; tail -40 $OUT/tune_trials.txt
kill %1
CASES=cross_entropy_bf16 SUITES=reduce BUDGET=8 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=100 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz $OUT/kfused.log
ls $OUT; echo "total $((SECONDS - start)) s"
