# run121: the tuner's fix (widened intermediates for the reference): the
# tuner's GPU tests (RunnerGpuTest.IntermediateInputsReachTheReferenceWidened
# among them), GpuReduceTest, the reduce suite (every case tuned).
# Built here: bash bench/gpu/prepare.sh build. On the H200, the call's
# command was `bash .gpu/run121.sh` (carry: that script, build/gpu-bundle):
#   #!/bin/bash
#   # reduce/2 again with the tuner's fix: the float64 reference of a kernel
#   # reading an intermediate gets a widened copy (RunnerGpuTest's regression,
#   # WorkerKernelsGpuTest's widen). Then GpuReduceTest, each variant's time for
#   # three cases (kfuse tune), and the reduce suite.
#   cd "$(dirname "$0")/.."
#   start=$SECONDS
#   b=build/gpu-bundle
#   export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
#   timeout 150 $b/bin/kfuse_tuner_test --gtest_filter='RunnerGpu*:WorkerKernelsGpu*:RunnerKernels*' > $OUT/tuner_gpu_test.log 2>&1
#   echo "tuner GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "^\[ +(OK|FAILED|SKIPPED) |Failure|tests ran|PASSED" $OUT/tuner_gpu_test.log | head -30
#   timeout 120 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_reduce_test.log 2>&1
#   echo "GpuReduceTest rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_reduce_test.log | head -10
#   addr=127.0.0.1:7611
#   $b/bin/kfused --address=$addr --store=/tmp/trials.db --worker=$b/bin/kfuse-worker > $OUT/kfused_trials.log 2>&1 &
#   pid=$!
#   for _ in $(seq 1 300); do $b/bin/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
#   for c in column_sum_bf16 column_sum_f32 sequence_mean_bf16 softmax_axis0_bf16; do
#     echo "== tune $c"
#     timeout 90 $b/bin/kfuse --server $addr tune bench/gpu/cases/reduce/$c.json --mode full --budget 20 2>&1 | tail -60
#   done > $OUT/tune_trials.log 2>&1
#   kill $pid; wait $pid 2>/dev/null
#   echo "trials done at $((SECONDS - start)) s"
#   SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=200 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
#   grep -E "compiled in|FAILED" $OUT/reduce_run.log
#   grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9
#   cp bench/results/$(date +%F)-reduce.md bench/results/$(date +%F)-reduce.json $OUT/ 2>/dev/null
#   echo "total $((SECONDS - start)) s"
