#!/bin/bash
# run211: HEAD (cccde38) as a whole on the GPU, as run207: kfuse_cuda_test,
# kfuse_client_test, the GPU tests of kfuse_tuner_test, then at once: every
# GpuReduceTest case (the twin cases of run210 with the yardstick's bound
# scaled to the output) and GpuReduceChainsTest; GpuChainsTest,
# GpuMatmulTest's plans and GpuAttentionTest (launches of kernels whose
# symbolic grids now carry an AT_MOST precondition); the Python client's
# tests with torch against a kfused that tunes.
# Made here: build/gpu-run211.tar.xz (bench/gpu/prepare.sh, the whole
# bundle packed with xz); .gpu/pysite (pip install --no-deps --target
# .gpu/pysite ./clients/python).
[ -d /tmp/k/gpu-run211 ] || { mkdir -p /tmp/k && xz -dc build/gpu-run211.tar.xz | tar -C /tmp/k -xf -; } || exit 1
b=/tmp/k/gpu-run211
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/device.txt
start=$SECONDS
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  $b/bin/kfuse_client_test; echo "client_test rc=$?"
  timeout 200 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1
( timeout 330 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_reduce.txt 2>&1
  echo "GpuReduceTest, GpuReduceChainsTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
( timeout 280 $b/bin/kfuse_cross_test --gtest_filter='GpuChains*:GpuMatmulTest.Plans*:GpuAttention*' > $OUT/gpu_chains.txt 2>&1
  echo "GpuChainsTest, GpuMatmulTest.Plans*, GpuAttentionTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_chains.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 200 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
for f in gpu_reduce gpu_chains; do tail -1 $OUT/$f.txt; grep -E "^\[  (FAILED|PASSED) |Failure" $OUT/$f.txt | head; done
grep -cE '^[a-z0-9_]+: [0-9]+ kernels' $OUT/gpu_reduce.txt
tail -3 $OUT/python_tests.txt
