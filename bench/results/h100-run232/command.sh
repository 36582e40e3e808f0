#!/bin/bash
# run232: scratch from a pool each launcher keeps (the C++ Launcher and
# kfuse.Launcher), or from torch's caching allocator (kfuse.torch), where
# both took it from the device's default pool at every launch; with
# bench/gpu/sum_timing.py timing each way beside the kernels alone (the
# profiler) and eager, every variant of the 1-D and 2-D f32 totals timed by
# the tuner (kfuse tune --mode full), then the GPU tests that launch plans
# with intermediates and workspaces (GpuI64ReduceTest: the compensated f32
# lanes meeting in double since ea2763c, not yet run on a GPU), the views
# beside reductions of GpuReduceTest, GpuRowTest (every row variant), and
# the Python client's tests with torch on the GPU.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run232.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run232.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run232
r=bench/results/h100-run232
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 150 python3 bench/gpu/sum_timing.py > $OUT/sum_timing.txt 2>&1; echo "sum_timing rc=$? $((SECONDS - start)) s" >> $OUT/sum_timing.txt
for c in total_1d_f32 total_2d_f32; do
  timeout 40 $b/bin/kfuse --server=127.0.0.1:7431 --timeout=35 tune --mode full --force $r/$c.json > $OUT/tune_$c.txt 2>&1
  echo "tune rc=$? $((SECONDS - start)) s" >> $OUT/tune_$c.txt
done
kill $kpid; wait $kpid 2>/dev/null
# The tests share what is left of 450 s.
left=$((450 - (SECONDS - start)))
( timeout $((left - 90)) $b/bin/kfuse_cross_test --gtest_filter='GpuI64*:I64*:GpuReduceChains*:GpuChains*:GpuLayout*' > $OUT/gpu_cross.txt 2>&1
  echo "cross rc=$? $((SECONDS - start)) s" >> $OUT/gpu_cross.txt
  KFUSE_GPU_CASES=views timeout 90 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/gpu_reduce_views.txt 2>&1
  echo "reduce views rc=$? $((SECONDS - start)) s" >> $OUT/gpu_reduce_views.txt ) &
( timeout $left $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest.*' > $OUT/gpu_row.txt 2>&1
  echo "row rc=$? $((SECONDS - start)) s" >> $OUT/gpu_row.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout $left python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
cat $OUT/sum_timing.txt; tail -n 25 $OUT/tune_*.txt
for f in $OUT/gpu_cross.txt $OUT/gpu_reduce_views.txt $OUT/gpu_row.txt; do
  tail -n 1 $f; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $f | head -20
done
tail -n 4 $OUT/python_tests.txt
echo "total $((SECONDS - start)) s"
