#!/bin/bash
# run165: reduce/5 as committed (split rows finish one output a thread; plain
# sums by split rows compiled for 40 registers; the last blocks' slice sums
# unrolled, up to 32 loads at once) beside run164's reduce/5 (four at once),
# run163's hand-edited kernel and reduce/3, as NVRTC compiles them (.gpu/cs:
# cs.cu from bench/results/h200-run161, entries.txt from here, the cubins of
# run164's sources with slices_unrolled.diff applied, of run164's sources
# and of run162/163's);
# then GpuReduceTest and the bench cases, and the reduce suite on its cases
# with slices (tuned here, 3 s a case).
start=$SECONDS
( cd .gpu/cs && timeout 120 ./cs > $OUT/cs.txt 2>&1; echo "cs rc=$?" )
grep -v "bare read\|L1 split" $OUT/cs.txt
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 230 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*:BenchCases*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure|PASSED" $OUT/gpu_tests.log | tail -12
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -40
CASES=column_sum_bf16,column_sum_f32,center_columns_f32,softmax_axis0_bf16,standardize_softmax_bf16 SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=150 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG|rror" $OUT/reduce_run.log | head -12
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
