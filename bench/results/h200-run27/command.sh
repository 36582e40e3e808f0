#!/bin/bash
# Every trial's time for four row cases after the instruction cuts; then the
# GPU tests of the other families (the shared prelude changed).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7612
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
python3 bench/gpu/suite.py write-cases $work/cases > /dev/null
for c in softmax_bf16_50257 layer_norm_bf16_5120 softmax_bf16_4096 softmax_f32_50257; do
  timeout 60 $b/kfuse --server $addr tune $work/cases/row/$c.json --mode full --budget 12 --force > $OUT/tune_$c.txt 2>&1
  grep -E 'state' $OUT/tune_$c.txt
done
kill $pid
echo "== GPU tests"
timeout 360 $b/kfuse_cross_test --gtest_filter='GpuChains*:GpuLayout*:GpuReduce*:GpuAttention*:GpuMatmul*' 2>&1 | grep -vE '^\[ RUN|^\[       OK' | tail -30 | tee $OUT/gpu_tests.txt
