#!/bin/bash
# Before it: apply 52d2863 (reduce/4, reverted until measured) and rebuild
# the bundle; put cs.cu and entries.txt in .gpu/cs with the cubins that
# entries.txt names (NVRTC, sm_90a, the service's options): gen_* of the
# sources reduce/3 writes for bench/gpu/cases/reduce/column_sum_{bf16,f32}.json
# (`kfuse compile --source`), gen4lb_* of those 52d2863 writes, gen4_* of
# the same with `__launch_bounds__(256, 4)` edited to `(256)`; the entry
# names in entries.txt follow the sources (the sources' hashes name them);
# then `nvcc -O3 -std=c++17 -arch=sm_90a -o cs cs.cu -lcuda` there.
# run161: reduce/4 (batched innermost loops, launch bounds of 1024 threads an
# SM) on the H200: (1) the column sums as NVRTC compiles reduce/3's and
# reduce/4's kernels (and reduce/4's batches under the default bounds) beside
# run160's hand-batched kernels and a copy of the same bytes (.gpu/cs/cs.cu);
# (2) GpuReduceTest (every variant of every reduce plan against fp64) and the
# bench cases; (3) the reduce suite's plain reductions, plans and the
# cross-entropy (tuned here, 3 s a case).
start=$SECONDS
( cd .gpu/cs && timeout 90 ./cs > $OUT/cs.txt 2>&1; echo "cs rc=$?" )
cat $OUT/cs.txt
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 230 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*:BenchCases*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure|PASSED" $OUT/gpu_tests.log | tail -12
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -40
CASES=column_sum_bf16,column_sum_f32,sequence_mean_bf16,center_columns_f32,softmax_axis0_bf16,standardize_softmax_bf16,cross_entropy_bf16 SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=250 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG|rror" $OUT/reduce_run.log | head -12
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
