#!/bin/bash
# The row heuristic keeps a wide row read in one pass looped at 512 threads
# (run136's fastest trial), not bulk-staged: the cross-entropy with the
# suite's 3 s tuning, beside the soft-target loss.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
CASES=cross_entropy_bf16,soft_target_loss_bf16 SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=150 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG|rror" $OUT/reduce_run.log | head
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,11-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
