#!/bin/bash
# row/6 (f32 bulk softmax keeps exp(x - max) over its staged row): the
# whole row suite (GpuRowTest passed in h200-run83).
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=250 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
grep -c "what=fault" $OUT/row_run.log; grep -rh "repro_bundle" $OUT/row_run.log | head -3
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
