# run124: the review fixes (c8fff2a: the slices' workspace sized by the compute
# type, widened intermediates freed after the reference): GpuReduceTest, the
# tuner's GPU tests, the two plan cases of the reduce suite tuned again.
# Built here: bash bench/gpu/prepare.sh build. On the H200, the call's
# command was `bash .gpu/run124.sh` (carry: that script, build/gpu-bundle):
#   #!/bin/bash
#   # The review fixes (c8fff2a: workspace sized by the compute type, widened
#   # intermediates freed after the reference): GpuReduceTest and the tuner's
#   # GPU tests, then the two plan cases tuned again.
#   cd "$(dirname "$0")/.."
#   start=$SECONDS
#   b=build/gpu-bundle
#   export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
#   timeout 120 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_tests.log 2>&1
#   echo "GpuReduceTest rc=$? at $((SECONDS - start)) s"
#   timeout 120 $b/bin/kfuse_tuner_test --gtest_filter='RunnerGpu*:WorkerKernelsGpu*' >> $OUT/gpu_tests.log 2>&1
#   echo "tuner GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure|PASSED" $OUT/gpu_tests.log | tail -24
#   CASES=center_columns_f32,softmax_axis0_bf16 SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=150 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
#   grep -E "compiled in|FAILED" $OUT/reduce_run.log
#   grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-13
#   rm -f $OUT/kfused.log $OUT/run.log $OUT/plans-and-manifests.tar.gz $OUT/*-reduce.*
#   echo "total $((SECONDS - start)) s"
