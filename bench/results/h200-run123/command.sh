# run123: reduce/2 as committed (a807b29, the heuristic's quarter of the
# resident threads): GpuReduceTest, BenchCasesTest, the tuner's GPU tests, the
# reduce suite (bench/results/2026-12-02-reduce.md).
# Built here: bash bench/gpu/prepare.sh build. On the H200, the call's
# command was `bash .gpu/run123.sh` (carry: that script, build/gpu-bundle):
#   #!/bin/bash
#   # reduce/2 as committed (the heuristic's quarter of the resident threads):
#   # GpuReduceTest, the tuner's GPU tests, and the reduce suite.
#   cd "$(dirname "$0")/.."
#   start=$SECONDS
#   b=build/gpu-bundle
#   export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
#   timeout 120 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*:BenchCases*' > $OUT/gpu_tests.log 2>&1
#   echo "GpuReduceTest, BenchCases rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -10
#   timeout 120 $b/bin/kfuse_tuner_test --gtest_filter='RunnerGpu*:WorkerKernelsGpu*' >> $OUT/gpu_tests.log 2>&1
#   echo "tuner GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "tests ran|PASSED|FAILED" $OUT/gpu_tests.log | tail -3
#   SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=200 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
#   grep -E "compiled in|FAILED" $OUT/reduce_run.log
#   grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-13
#   rm -f $OUT/kfused.log $OUT/run.log
#   echo "total $((SECONDS - start)) s"
