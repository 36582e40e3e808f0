#!/bin/bash
# run223: at 2074a15 (the matmul yardsticks' tiles on grid.x, so N past
# 1048560 is generated; a weak float kept through a split reduction): every
# GPU test of the C++ client, cuda and tuner binaries, GpuMatmulTest (every
# variant, the new 3 x 1048600 x 40 case among them, and the plans),
# GpuChains, GpuReduceChains and GpuAttention, and the Python client's tests
# with torch on the GPU against this kfused.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run223.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run223.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run223
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  $b/bin/kfuse_client_test; echo "client_test rc=$?"
  timeout 200 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1 &
( timeout 420 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest.*:GpuChains*:GpuReduceChains*:GpuAttention*' > $OUT/gpu_cross.txt 2>&1
  echo "GpuMatmulTest, GpuChainsTest, GpuReduceChainsTest, GpuAttentionTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_cross.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
tail -1 $OUT/gpu_cross.txt; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $OUT/gpu_cross.txt | head -20
tail -4 $OUT/python_tests.txt
echo "total $((SECONDS - start)) s"
