#!/bin/bash
# run229: i64 reductions and views, iotas in element-wise kernels. GpuI64ReduceTest (every kernel of each
# i64 plan under variants covering each value of each parameter, and the
# fp64 yardstick's plan, against the CPU evaluator exactly), the random
# reduce chains and the i64 element-wise chains, the Python client's tests
# with torch on the GPU against this kfused (int64 mask and count sums
# among them), examples/mask_lengths_i64.json tuned through kfused, and
# bench/gpu/sum_timing.py (sums against eager, side by side).
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run229.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run229.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run229
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
( timeout 400 $b/bin/kfuse_cross_test --gtest_filter='GpuI64*:I64*:GpuReduceChains*:GpuChainsTest.I64*' > $OUT/gpu_cross.txt 2>&1
  echo "cross rc=$? $((SECONDS - start)) s" >> $OUT/gpu_cross.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
$b/bin/kfuse --server 127.0.0.1:7431 tune examples/mask_lengths_i64.json > $OUT/tune_mask_lengths.txt 2>&1; echo "tune rc=$?" >> $OUT/tune_mask_lengths.txt
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 200 python3 bench/gpu/sum_timing.py > $OUT/sum_timing.txt 2>&1; echo "sum_timing rc=$?" >> $OUT/sum_timing.txt
kill $kpid; wait $kpid 2>/dev/null
tail -14 $OUT/tune_mask_lengths.txt
cat $OUT/sum_timing.txt
tail -1 $OUT/gpu_cross.txt; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $OUT/gpu_cross.txt | head -20
tail -4 $OUT/python_tests.txt
echo "total $((SECONDS - start)) s"
