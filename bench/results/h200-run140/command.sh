#!/bin/bash
# run140: row/14 (one sum, not one a vector lane, in the online max-and-sum
# pass where the sum's result is 16-bit) against row/13, side by side
# (.gpu/ce2: the generated sources, nvcc): the cross-entropy's looped pass,
# the ATen-form NLL's, and the 50257-wide bf16 softmax (bulk-staged).
# Then the suite's three cases, then GpuRowTest and GpuReduceTest.
# The suite step stopped at once (run.sh's SUITES is space-separated,
# "row reduce"); the side-by-side figures stand alone. The
# harness is ce2/main.cu here; its k_*.cu were kfuse compile --source
# output: row/13's (run139's ce/gen.cuh and ce/new.cu, and the golden
# row_softmax_bf16_50257_peeled.cu at 69c9673) and the same with
# generator.diff applied. The change was not kept.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
(cd .gpu/ce2 && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -diag-suppress 177 -o t main.cu k_*.cu 2>&1 | grep -i error)
(cd .gpu/ce2 && timeout 60 ./t; FLUSH_WRITE=1 timeout 60 ./t) 2>&1 | tee $OUT/side_by_side.txt
echo "harness done at $((SECONDS - start)) s"
CASES=softmax_bf16_50257,cross_entropy_bf16,nll_log_softmax_bf16 SUITES=row,reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=170 timeout 190 bash bench/gpu/run.sh $b > $OUT/suite_run.log 2>&1
echo "suite rc=$? at $((SECONDS - start)) s"
grep -E '^\| [a-z]' $OUT/suite_run.log | cut -d'|' -f2-9,12-14
left=$((585 - (SECONDS - start)))
timeout $left $b/bin/kfuse_cross_test --gtest_filter="GpuRow*:GpuReduce*" > $OUT/gpu_tests.log 2>&1
echo "GpuRowTest+GpuReduceTest rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -10
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -30
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
ls $OUT; echo "total $((SECONDS - start)) s"
