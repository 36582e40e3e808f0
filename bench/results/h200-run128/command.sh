#!/bin/bash
# reduce/3 with the f32 intermediates read as 32-byte vectors by reduction
# kernels (hoisted out of their loops), after run127 lost 6% on both plans:
# GpuReduceTest (every variant of every kernel of twelve plans against fp64),
# the tuner's GPU tests, then the reduce suite.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 300 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*:BenchCases*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -20
timeout 120 $b/bin/kfuse_tuner_test --gtest_filter='RunnerGpu*:WorkerKernelsGpu*:RunnerTest.*' >> $OUT/gpu_tests.log 2>&1
echo "tuner GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "tests ran|PASSED|FAILED" $OUT/gpu_tests.log | tail -3
SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=220 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG" $OUT/reduce_run.log
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
