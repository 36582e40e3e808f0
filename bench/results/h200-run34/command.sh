#!/bin/bash
# L2 eviction policies on looped and staged rows only (register-resident
# rows plain again, as in run32): the row suite. The kernels are byte for
# byte those GpuRowTest checked in run32 (resident) and run33 (looped).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=285 bash bench/gpu/run.sh build/gpu-bundle > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
echo "total $((SECONDS - start)) s"
