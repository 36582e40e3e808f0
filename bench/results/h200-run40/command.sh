#!/bin/bash
# After run39: warps holding whole rows (wn = 1: no barrier, no shared memory). Where the fused softmax epilogue's time goes (router shape 32768 x 4096 @
# 4096 x 128): every trial of the product with exp only (element-wise
# epilogue), of the product minus its row max (one reduction), and of the
# whole softmax, beside the product alone.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7614
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
for c in router_max_sub router_softmax_bf16; do
  timeout 60 $b/kfuse --server $addr tune .gpu/$c.json --mode full --budget 20 --force > $work/tune_$c.txt 2>&1
  echo "== $c"; grep -E 'tune ' $work/tune_$c.txt | sed -E 's/.*(\{[^}]*}) +([0-9.]+ [um]s).*/\2 \1/' | sort -n | head -3
  (echo "== $c"; cat $work/tune_$c.txt) >> $OUT/tunes.txt
done
kill $pid
