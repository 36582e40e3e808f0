#!/bin/bash
# A trial of the heuristic for odd widths (not kept): resident rows peeled to 8-element vectors
# (bf16; 4 for f32) against the scalar resident rows it chose before. Every
# trial of softmax at widths 1001 and 3001, 131072 rows (the heuristic first).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7612
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
for c in softmax_bf16_1001 softmax_f32_1001 softmax_bf16_3001 softmax_f32_3001; do
  timeout 25 $b/kfuse --server $addr tune bench/results/h200-run36/$c.json --mode full --budget 5 --force > $OUT/tune_$c.txt 2>&1
  echo "== $c"; grep -E 'tune ' $OUT/tune_$c.txt | head -1
  grep -E 'tune ' $OUT/tune_$c.txt | grep 'resident=1' | grep -E 'vec=1\}' | head -2
  grep -E 'tune ' $OUT/tune_$c.txt | sed -E 's/.*(row_reduction[^}]*}) +([0-9.]+ [um]s).*/\2 \1/' | sort -n | head -3
done
kill $pid
