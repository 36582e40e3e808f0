#!/bin/bash
# run231: rows sliced over the grid (slices: a 1-D total, or a few long rows
# read in one pass into per-row values, split over blocks that meet in a
# workspace) beside run229's i64 reductions and iotas, with run229's test
# fixes. GpuI64ReduceTest (1-D f32 and i64 totals of 4194304 and 1000003
# elements among its cases: every kernel under variants covering each value
# of each parameter, and the fp64 yardstick), the random reduce chains, the
# row and reduce GPU tests, the Python client's tests with torch on the GPU
# against this kfused, and bench/gpu/sum_timing.py side by side with eager.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run231.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run231.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run231
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
( timeout 450 $b/bin/kfuse_cross_test --gtest_filter='GpuI64*:I64*:GpuReduceChains*:GpuChainsTest.I64*:GpuReduceTest.*' > $OUT/gpu_cross.txt 2>&1
  echo "cross rc=$? $((SECONDS - start)) s" >> $OUT/gpu_cross.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 200 python3 bench/gpu/sum_timing.py > $OUT/sum_timing.txt 2>&1; echo "sum_timing rc=$?" >> $OUT/sum_timing.txt
kill $kpid; wait $kpid 2>/dev/null
cat $OUT/sum_timing.txt
tail -1 $OUT/gpu_cross.txt; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $OUT/gpu_cross.txt | head -30
tail -4 $OUT/python_tests.txt
echo "total $((SECONDS - start)) s"
