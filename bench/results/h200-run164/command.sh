#!/bin/bash
# run164: reduce/5 (split rows finish one output a thread; plain sums by
# split rows compiled for 40 registers) on the H200: (1) the column sums as
# NVRTC compiles reduce/3's, reduce/4's and reduce/5's kernels beside run163's
# hand-edited kernel, run160's hand-batched kernels and a copy of the same
# bytes (.gpu/cs: cs.cu from bench/results/h200-run161, entries.txt from here, the
# cubins from `kfuse compile --source` of bench/gpu/cases/reduce/column_sum_*
# through NVRTC, sm_90a); (2) GpuReduceTest (every variant of every reduce
# plan against fp64) and the bench cases; (3) the whole reduce suite (tuned
# here, 3 s a case).
start=$SECONDS
( cd .gpu/cs && timeout 120 ./cs > $OUT/cs.txt 2>&1; echo "cs rc=$?" )
grep -v "bare read\|L1 split" $OUT/cs.txt
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 230 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*:BenchCases*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure|PASSED" $OUT/gpu_tests.log | tail -12
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -40
SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=250 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG|rror" $OUT/reduce_run.log | head -12
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
