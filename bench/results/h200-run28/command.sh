#!/bin/bash
# The whole row suite (row/3, heuristic from run27), then the transformer
# block through kfuse.torch (warm path with the tensor guard).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PYTHONUNBUFFERED=1
b=$PWD/build/gpu-bundle/bin
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=285 bash bench/gpu/run.sh build/gpu-bundle > $OUT/row_run.log 2>&1
tail -45 $OUT/row_run.log | grep -E '^\|' | cut -d'|' -f2,4,5,7,8,12 
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7613
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
PYTHONPATH=.gpu/py timeout 230 python3 bench/gpu/torch_block.py --server $addr --out $OUT --seconds 190 2>&1 | tail -30
kill $pid
