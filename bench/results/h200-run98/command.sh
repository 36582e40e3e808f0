#!/bin/bash
# main9.cu: a16_G, l16_G are the generator's kernels after the change
# (.gpu/rows/gen, KIND=rms bf16 16384 8192 resident=1 / resident=0,
# rows=1,threads=512,vec=8); nvcc -O3 -arch=sm_90 -o tr9 main9.cu -lcuda.
# Looped passes load without the kf_valid guard: the bf16 RMSNorm 8192
# kernels as generated before (a16_A, l16_N) and after (a16_G, l16_G)
# beside the 32-bit-index trial (l16_PK32) and torch.compile's kernel
# (.gpu/tr/main9.cu, both flushes); then GpuRowTest and the row suite.
cd "$(dirname "$0")/.."
start=$SECONDS
(cd .gpu/tr9 && timeout 60 ./tr9 && FLUSH_WRITE=1 timeout 60 ./tr9) 2>&1 | tee $OUT/tr9.txt
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 380 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*' >$OUT/gpu_row_test.txt 2>&1
echo "GpuRowTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head
grep -B2 -A10 Failure $OUT/gpu_row_test.txt | head -30
SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=200 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2,4,5,7,8,12
echo "faults: $(grep -c 'what=fault' $OUT/kfused.log)"
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
