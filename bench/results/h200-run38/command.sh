#!/bin/bash
# After run37: one reciprocal a row for softmax's division, four-warp tiles in
# the space. Row reductions in a matmul's epilogue: GpuMatmulTest (every variant of the
# fused softmax / LayerNorm cases against fp64, the plans of several kernels),
# every trial of the router softmax (32768 x 4096 @ 4096 x 128), then the
# matmul suite's router case against torch.compile, eager and torch.softmax(a @ w).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
nvidia-smi --query-gpu=name,driver_version --format=csv
echo "== GpuMatmulTest"
timeout 300 $b/kfuse_cross_test --gtest_filter='GpuMatmul*' 2>&1 | grep -vE "^\[ RUN|^\[       OK" | tail -30 | tee $OUT/gpu_matmul_test.txt
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7613
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
echo "== trials"
# The fused chain, then the two kernels a split plan would run: the product
# alone (storing it) and the softmax of a stored [32768, 128].
for c in router_softmax_bf16 router_matmul_only router_softmax_only; do
  timeout 60 $b/kfuse --server $addr tune .gpu/$c.json --mode full --budget 20 --force > $work/tune_$c.txt 2>&1
  echo "== $c"; grep -E 'tune ' $work/tune_$c.txt | sed -E 's/.*(\{[^}]*}) +([0-9.]+ [um]s).*/\2 \1/' | sort -n | head -4
  grep -vE '^\[' $work/tune_$c.txt | head -12
  (echo "== $c"; cat $work/tune_$c.txt) >> $OUT/tunes.txt
done
kill $pid
echo "== suite"
SUITES=matmul CASES=router_softmax_bf16 MATMUL_BUDGET=8 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=200 bash bench/gpu/run.sh build/gpu-bundle
