#!/bin/bash
# run222: at 86800c2 (a tuning job's messages and refusals in each caller's names;
# stray op attributes refused; an integer tensor to a negative Python int
# refused), again: the Python client's tests with torch on the GPU against this
# kfused (launches through kfuse.Launcher, the translation cases against
# float64 on fresh inputs), the C++ client's and cuda tests, the tuner's
# GPU tests, and the GPU chains, matmul plans and attention tests.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run222.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run222.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run222
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  $b/bin/kfuse_client_test; echo "client_test rc=$?"
  timeout 200 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1 &
( timeout 300 $b/bin/kfuse_cross_test --gtest_filter='GpuChains*:GpuMatmulTest.Plans*:GpuAttention*' > $OUT/gpu_chains.txt 2>&1
  echo "GpuChainsTest, GpuMatmulTest.Plans*, GpuAttentionTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_chains.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
tail -1 $OUT/gpu_chains.txt; grep -E "^\[  (FAILED|PASSED) |Failure" $OUT/gpu_chains.txt | head
tail -4 $OUT/python_tests.txt
echo "total $((SECONDS - start)) s"
