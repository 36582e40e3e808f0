#!/bin/bash
# The row suite as run107, the same generators; new: every case and sweep
# point beside a copy of its own bytes (bench/gpu/suite.py same_bytes_copy).
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=480 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,6,7,8
echo "faults: $(grep -c 'what=fault' $OUT/kfused.log)"
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
