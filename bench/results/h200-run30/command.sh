#!/bin/bash
# Rows split over a cluster of blocks (split=2..8, sm_90) and resident rows
# peeled to their first aligned vector: every variant against fp64; then
# every trial's time for the 50257-wide softmax; then the Python GPU tests
# (CUDA-graph capture of a compiled function).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
start=$SECONDS
timeout 270 $b/kfuse_cross_test --gtest_filter='GpuRow*' 2>&1 | grep -vE '^\[ RUN|^\[       OK' | tail -30 > $OUT/gpu_row_test.txt
tail -3 $OUT/gpu_row_test.txt; echo "GpuRowTest wall $((SECONDS - start)) s"
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7612
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
python3 bench/gpu/suite.py write-cases $work/cases > /dev/null
for c in softmax_bf16_50257 softmax_f32_50257; do
  timeout 50 $b/kfuse --server $addr tune $work/cases/row/$c.json --mode full --budget 12 --force > $OUT/tune_$c.txt 2>&1
  grep -E 'state|best|winner' $OUT/tune_$c.txt | head -5
done
kill $pid
echo "tunes done at $((SECONDS - start)) s"
KFUSED=$b/kfused PYTHONPATH=.gpu/py timeout 150 python3 -m pytest -p no:cacheprovider -q clients/python/tests -m gpu -s > $OUT/python_gpu_tests.txt 2>&1
tail -5 $OUT/python_gpu_tests.txt
echo "total $((SECONDS - start)) s"
