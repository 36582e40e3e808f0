#!/bin/bash
# L2 eviction policies: a looped row's earlier passes keep it, its last
# pass, resident rows' loads and every full-row store let it go. Every
# variant against fp64, the 50257-wide softmax's best trials, then the row
# suite.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
start=$SECONDS
timeout 170 $b/kfuse_cross_test --gtest_filter='GpuRow*' 2>&1 | grep -vE '^\[ RUN|^\[       OK' | tail -30 > $OUT/gpu_row_test.txt
tail -3 $OUT/gpu_row_test.txt; echo "GpuRowTest wall $((SECONDS - start)) s"
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7612
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
python3 bench/gpu/suite.py write-cases $work/cases > /dev/null
for c in softmax_bf16_50257 softmax_f32_50257; do
  timeout 30 $b/kfuse --server $addr tune $work/cases/row/$c.json --mode full --budget 7 --force > $OUT/tune_$c.txt 2>&1
  grep -E 'tune ' $OUT/tune_$c.txt | sed -E 's/.*(row_reduction[^}]*}) +([0-9.]+ [um]s).*/\2 \1/' | sort -n | head -4
done
kill $pid
echo "tunes done at $((SECONDS - start)) s"
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=285 bash bench/gpu/run.sh build/gpu-bundle > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
echo "total $((SECONDS - start)) s"
