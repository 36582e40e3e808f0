#!/bin/bash
# run225: element-wise i64 arithmetic (GpuChainsTest.I64ChainsMatchTheEvaluatorExactly,
# the Python torch test test_int64_arithmetic_fuses_exactly), Python bools
# sent as typed bool constants, and every other GPU test: the C++ client,
# cuda and tuner binaries, GpuMatmulTest, GpuChains, GpuReduceChains and
# GpuAttention, and the Python client's tests with torch on the GPU against
# this kfused.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run225.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run225.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run225
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  $b/bin/kfuse_client_test; echo "client_test rc=$?"
  timeout 200 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1 &
( timeout 420 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest.*:GpuChains*:GpuReduceChains*:GpuAttention*:I64*' > $OUT/gpu_cross.txt 2>&1
  echo "GpuMatmulTest, GpuChainsTest, GpuReduceChainsTest, GpuAttentionTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_cross.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
# The i64 example tuned through a kfused on this GPU: every variant checked
# against the fp64 yardstick before it is timed.
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused_i64.log 2>&1 &
kpid=$!; sleep 3
$b/bin/kfuse --server 127.0.0.1:7431 tune examples/positions_i64.json > $OUT/tune_i64.txt 2>&1; echo "tune rc=$?" >> $OUT/tune_i64.txt
kill $kpid; wait $kpid 2>/dev/null
tail -12 $OUT/tune_i64.txt
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
tail -1 $OUT/gpu_cross.txt; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $OUT/gpu_cross.txt | head -20
tail -4 $OUT/python_tests.txt
echo "total $((SECONDS - start)) s"

# Then, on the same warm machine, GpuChainsTest.I64ChainsMatchTheEvaluatorExactly
# again with its float output compared after rounding to f32 (the first
# run compared it with the unrounded double and failed on that output
# alone; every integer output matched): gpu_i64_rerun.txt, made by
#   .gpu/kfuse_cross_test --gtest_filter='GpuChainsTest.I64*:I64*'
# with the test binary built at the fix, stripped into .gpu/.
