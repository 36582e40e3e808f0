#!/bin/bash
# run213: at 4c4de62, after a review: every family now emits through
# EmitFamily (grid preconditions on matmul, reduce and attention plans too),
# and the tuner's seed is the first variant that emits. At once: the GPU
# tests of kfuse_tuner_test (tuning end to end) and kfuse_client_test;
# GpuReduceTest's i32 row sums, which now wrap (x * 2^29), and twin cases;
# GpuChainsTest, GpuMatmulTest's plans and GpuAttentionTest.
# Made here: build/gpu-run213.tar.xz (bench/gpu/prepare.sh, the whole
# bundle packed with xz).
mkdir -p /tmp/k && xz -dc build/gpu-run213.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run213
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
( { timeout 200 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$? $((SECONDS - start)) s"
    timeout 100 $b/bin/kfuse_client_test; echo "client_test rc=$? $((SECONDS - start)) s"; } > $OUT/service_tests.txt 2>&1 ) &
( KFUSE_GPU_VERBOSE=1 KFUSE_GPU_CASES=_row_sum timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/int_sums.txt 2>&1
  echo "GpuReduceTest (int_row_sum*) rc $? $((SECONDS - start)) s" >> $OUT/int_sums.txt ) &
( timeout 250 $b/bin/kfuse_cross_test --gtest_filter='GpuChains*:GpuMatmulTest.Plans*:GpuAttention*' > $OUT/gpu_chains.txt 2>&1
  echo "GpuChainsTest, GpuMatmulTest.Plans*, GpuAttentionTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_chains.txt ) &
wait
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
for f in int_sums gpu_chains; do tail -1 $OUT/$f.txt; grep -E "^\[  (FAILED|PASSED) |Failure" -A3 $OUT/$f.txt | head -8; done
grep -E '^int_row_sum' $OUT/int_sums.txt; grep -c "output 0" $OUT/int_sums.txt
