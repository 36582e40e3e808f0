#!/bin/bash
# The committed state of row reductions in a matmul's epilogue (matmul/2)
# and the check's dtype-range rule: GpuMatmulTest (every variant of the
# fused cases, whole-row warps, a batched softmax feeding a second product),
# the worker's compare kernels and runner on the GPU, every trial of the
# router shape (product alone, with exp, minus its row max, softmax), then
# the matmul suite's router case.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
echo "== GpuMatmulTest"
timeout 300 $b/kfuse_cross_test --gtest_filter='GpuMatmul*' 2>&1 | grep -vE "^\[ RUN|^\[       OK" | tail -30 | tee $OUT/gpu_matmul_test.txt
echo "== tuner GPU tests"
timeout 150 $b/kfuse_tuner_test --gtest_filter='WorkerKernelsGpu*:RunnerGpu*' 2>&1 | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) |tests ran|Failure" | tee $OUT/tuner_gpu_test.txt
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7615
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
for c in router_matmul_only router_exp_only router_max_sub router_softmax_bf16; do
  timeout 60 $b/kfuse --server $addr tune .gpu/$c.json --mode full --budget 20 --force > $work/tune_$c.txt 2>&1
  echo "== $c"; grep -E 'tune ' $work/tune_$c.txt | sed -E 's/.*(\{[^}]*}) +([0-9.]+ [um]s).*/\2 \1/' | sort -n | head -3
  grep -cE 'wrong_result' $work/tune_$c.txt
  (echo "== $c"; cat $work/tune_$c.txt) >> $OUT/tunes.txt
done
kill $pid
echo "== suite"
SUITES=matmul CASES=router_softmax_bf16 MATMUL_BUDGET=8 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=150 bash bench/gpu/run.sh build/gpu-bundle 2>&1 | grep -E "router|copy_1GiB|targets met"
