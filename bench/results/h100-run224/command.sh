#!/bin/bash
# run224: the row suite at 1ded6fa (no row kernel changed since row/17's
# run214 on the H200 and run218 on an H100), every case tuned (3 s budget)
# and timed beside eager, torch.compile and the copies, with the other row
# counts of each width.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run224.tar.xz.
mkdir -p /tmp/k && xz -dc build/gpu-run224.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run224
start=$SECONDS
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/device.txt
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=500 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,6,7,8 | head -60
echo "faults: $(grep -c 'what=fault' $OUT/kfused.log)"
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
