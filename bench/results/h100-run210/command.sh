#!/bin/bash
# run210: at 1bf5b2f, first the new GpuReduceTest cases
# (a row sum used in its row and written as its keepdim-less twin, 1000 and
# 50257 wide, f32: row/15's twin case on a GPU), then the matmul suite as
# run149 ran it (every case beside cuBLASLt and torch.compile in one run),
# to restate the few-row figures at this commit.
# Made here: bash bench/gpu/prepare.sh, then build/gpu-bundle packed as
# build/gpu-run210.tar.xz (directory gpu-run210).
mkdir -p /tmp/k && xz -dc build/gpu-run210.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run210
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
KFUSE_GPU_CASES=sum_normalized timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/twin.txt 2>&1
echo "rc $? $((SECONDS - start)) s" >> $OUT/twin.txt
grep -E "^sum_normalized|kernels|^\[  (FAILED|PASSED) |Failure" $OUT/twin.txt | head -12; tail -1 $OUT/twin.txt
SUITES=matmul SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=400 bash bench/gpu/run.sh $b > $OUT/suite.log 2>&1
grep -vE '^\{"case"' $OUT/suite.log | tail -16
cp bench/results/$(date +%F)-matmul.md bench/results/$(date +%F)-matmul.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
