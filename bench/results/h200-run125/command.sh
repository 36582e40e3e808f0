#!/bin/bash
# .gpu/suite_old.py was `git show 3114dac:bench/gpu/suite.py` (workspaces zeroed by zero_()).
# Workspaces zeroed by cuMemsetD8Async (as clients/launcher.cc does) against
# torch's zero_() (a fill kernel), the suite's launcher as it was: the
# 50257-wide softmax (a zeroed row counter) and the reduce suite's column sums
# (zeroed slice counters), on the same manifests, new / old / new. Then the
# tuner's tests (the worker protocol's version check included).
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
cases=softmax_bf16_50257,softmax_f32_50257,column_sum_bf16,column_sum_f32,sequence_mean_bf16
SUITES="row reduce" CASES=$cases BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=260 \
  bash bench/gpu/run.sh $b > $OUT/new1.log 2>&1
echo "run.sh rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED" $OUT/new1.log
m=/tmp/m125; mkdir -p $m; tar -C $m -xzf $OUT/plans-and-manifests.tar.gz
for pass in old new2; do
  py=bench/gpu/suite.py; [ $pass = old ] && py=.gpu/suite_old.py
  for s in row reduce; do
    timeout 150 python3 $py bench --suite $s --manifests $m/manifests --out /tmp/o-$pass --cases $cases \
      >> $OUT/$pass.log 2>&1
  done
  echo "$pass at $((SECONDS - start)) s"
done
for f in new1 old new2; do
  echo "== $f"; grep -E '^\| [a-z]' $OUT/$f.log | grep -E "50257|column_sum|sequence_mean" | cut -d'|' -f2-7 | grep -v "^ case"
done
timeout 100 $b/bin/kfuse_tuner_test --gtest_filter='RunnerGpu*:WorkerKernelsGpu*:RunnerTest.*:WorkerProtocol*' > $OUT/tuner_tests.log 2>&1
echo "tuner tests rc=$? at $((SECONDS - start)) s"; grep -E "tests ran|PASSED|FAILED" $OUT/tuner_tests.log | tail -4
rm -f $OUT/kfused.log $OUT/run.log $OUT/plans-and-manifests.tar.gz
ls $OUT; echo "total $((SECONDS - start)) s"
