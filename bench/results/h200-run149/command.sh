#!/bin/bash
# run149: the matmul suite with matmul/7 (streamed loads unpredicated where
# K is whole steps): every case beside cuBLASLt and torch.compile in one run.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
SUITES=matmul SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=420 bash bench/gpu/run.sh $b > $OUT/suite.log 2>&1
grep -vE '^\{"case"' $OUT/suite.log | tail -14
cp bench/results/$(date +%F)-matmul.md bench/results/$(date +%F)-matmul.json $OUT/ 2>/dev/null
ls $OUT
