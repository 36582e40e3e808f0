#!/bin/bash
# run239: windows in the reduction family (reduce/7: consecutive leaves off
# the vectors' alignment, such as rows of an odd pitch, read through
# windows, not an element at a time), and the whole row family's check
# under row/20, whose windows now serve a norm's weight or a mask beside
# every peeled (odd-width) row. First the tuned time of the column sums of
# a bf16 [32768, 4096] in rows 4100 apart
# (bench/chains/strided_rows/padded_column_sum_bf16.json; its space holds
# vec-1 variants beside the windowed vec-8 ones), alone on the GPU. Then
# the tests side by side: GpuRowTest.EveryVariantMatchesReference (every
# variant of every row chain at widths 1000 to 50257 against fp64),
# GpuReduceTest's padded column sums (every variant), GpuLayoutTest (named
# and random chains with views), GpuChainsTest (random pointwise chains).
# Predicted: the windowed vec-8 column sums at 0.8 of a copy or better and
# 1.5x or more faster than the vec-1 variants of the same split and slices.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run239.tar.xz.
mkdir -p /tmp/k && xz -dc build/gpu-run239.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run239
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
timeout 25 $b/bin/kfuse --server=127.0.0.1:7431 --timeout=24 tune --mode full --budget 6 --force \
  bench/chains/strided_rows/padded_column_sum_bf16.json > $OUT/tune_padded_column_sum_bf16.txt 2>&1
echo "tune rc=$? $((SECONDS - start)) s" >> $OUT/tune_padded_column_sum_bf16.txt
kill $kpid; wait $kpid 2>/dev/null
( timeout 520 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest.EveryVariant*' > $OUT/gpu_row.txt 2>&1
  echo "row rc=$? $((SECONDS - start)) s" >> $OUT/gpu_row.txt ) &
tests=($!)
( KFUSE_GPU_CASES=padded timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/gpu_reduce.txt 2>&1
  echo "reduce rc=$? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
tests+=($!)
( timeout 300 $b/bin/kfuse_cross_test --gtest_filter='GpuLayoutTest.*:GpuChainsTest.*' > $OUT/gpu_pointwise.txt 2>&1
  echo "pointwise rc=$? $((SECONDS - start)) s" >> $OUT/gpu_pointwise.txt ) &
tests+=($!)
wait "${tests[@]}"
grep -E "^state|variant|roofline|tune rc" $OUT/tune_padded_column_sum_bf16.txt
for f in $OUT/gpu_row.txt $OUT/gpu_reduce.txt $OUT/gpu_pointwise.txt; do
  tail -n 1 $f; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $f | head -20
done
