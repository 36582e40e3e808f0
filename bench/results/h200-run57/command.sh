#!/bin/bash
# matmul/4 (split K over clusters; few-row spaces lead with wide cluster
# tiles at M > 32): the whole matmul suite in one run.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
SUITES=matmul SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=380 bash bench/gpu/run.sh $b > $OUT/suite.log 2>&1
grep -vE '^\{"case"' $OUT/suite.log | tail -14
w=$(ls -dt /tmp/kfuse-bench.* | head -1)
mkdir -p /tmp/res; cp $w/plans/*.txt /tmp/res/ 2>/dev/null; ls $w > /tmp/res/listing.txt
cp bench/results/$(date +%F)-matmul.md bench/results/$(date +%F)-matmul.json $OUT/ 2>/dev/null
tar czf $OUT/plans.tgz -C /tmp res
ls $OUT
