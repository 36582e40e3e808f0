#!/bin/bash
# The row suite with row/10 (the f32 norms' products rounded once).
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=200 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
echo "faults: $(grep -c 'what=fault' $OUT/kfused.log)"
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
