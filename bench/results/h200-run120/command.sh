# run120: reduce/2's first draft (the heuristic filling all 132 x 2048
# threads; every sum compensated), before the tuner's fix: GpuReduceTest, then
# the new reduce suite. The column softmax went untuned: its sum kernel's
# float64 reference read the bf16 intermediate as doubles (commit eb70a58).
# Built here: bash bench/gpu/prepare.sh build. On the H200, the call's
# command was `bash .gpu/run120.sh` (carry: that script, build/gpu-bundle):
#   #!/bin/bash
#   # reduce/2 on the H200: every variant of every reduction kernel against fp64
#   # (GpuReduceTest), each variant's time for three cases (kfuse tune), then the
#   # new reduce suite against eager, torch.compile and the copy.
#   cd "$(dirname "$0")/.."
#   start=$SECONDS
#   b=build/gpu-bundle
#   export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
#   timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_reduce_test.log 2>&1
#   echo "GpuReduceTest rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_reduce_test.log | head -20
#   addr=127.0.0.1:7611
#   $b/bin/kfused --address=$addr --store=/tmp/trials.db --worker=$b/bin/kfuse-worker > $OUT/kfused_trials.log 2>&1 &
#   pid=$!
#   for _ in $(seq 1 300); do $b/bin/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
#   for c in column_sum_bf16 column_sum_f32 sequence_mean_bf16; do
#     echo "== tune $c"
#     timeout 60 $b/bin/kfuse --server $addr tune bench/gpu/cases/reduce/$c.json --mode full --budget 20 2>&1 | tail -40
#   done > $OUT/trials.txt 2>&1
#   kill $pid; wait $pid 2>/dev/null
#   echo "trials done at $((SECONDS - start)) s"
#   SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=240 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
#   grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9
#   cp bench/results/$(date +%F)-reduce.md bench/results/$(date +%F)-reduce.json $OUT/ 2>/dev/null
#   echo "total $((SECONDS - start)) s"
