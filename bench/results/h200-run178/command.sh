#!/bin/bash
# run178: this stop's GPU-facing changes on the H200, in one call:
# (1) the random reduction-chain property test (GpuReduceChainsTest) over
#     120 seeds, plans of one to five kernels, each at its heuristic and
#     with each kernel at three other variants, against fp64;
# (2) the fixed reduction and element-wise suites the partitioner's change
#     could move (GpuReduceTest, GpuChainsTest, GpuLayoutTest, matmul plans);
# (3) kfused end to end: kfuse tune of an RMSNorm, kfuse_trials_total and
#     kfuse_queue_depth{pool} in /metrics, the build event's client name.
b=$PWD/build/gpu-bundle
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
KFUSE_REDUCE_CHAINS=120 timeout 170 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceChainsTest.*' > $OUT/reduce_chains.txt 2>&1
echo "reduce chains rc=$?"; tail -4 $OUT/reduce_chains.txt
timeout 60 $b/bin/kfuse_cross_test --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*:GpuMatmulTest.PlansOfSeveralKernelsMatchReference' > $OUT/chains.txt 2>&1
echo "chains rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED)" $OUT/chains.txt
t=$(mktemp -d)
kfuse chain rms_norm --dtype bf16 --width 4096 --rows-symbol rows --rows-hint 16384 -o $t/rms.json
kfused --address=127.0.0.1:7420 --store=$t/k.db --metrics_address=127.0.0.1:9420 --worker=$b/bin/kfuse-worker 2> $OUT/kfused.log &
kp=$!
for i in $(seq 100); do kfuse health >/dev/null 2>&1 && break; sleep 0.3; done
kfuse tune $t/rms.json > $OUT/tune.txt 2>&1; echo "tune rc=$?" | tee -a $OUT/tune.txt
python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:9420/metrics\").read().decode())" | grep -E "^kfuse_(trials_total|queue_depth|verification)" | tee $OUT/metrics.txt
kill -TERM $kp; wait $kp
grep " build " $OUT/kfused.log | tee $OUT/build_event.txt
timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/reduce.txt 2>&1
echo "reduce rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED)" $OUT/reduce.txt
