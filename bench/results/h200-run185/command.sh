#!/bin/bash
# run185: after this stop's changes, side by side:
# (1) every GPU suite whose output check moved into gpu_test::CheckOutputs
#     (GpuRowTest, GpuReduceTest, GpuChainsTest, GpuLayoutTest,
#     GpuReduceChainsTest with 40 seeds, and through CheckKernel
#     GpuMatmulTest and GpuAttentionTest), against fp64 on fresh inputs;
# (2) the Python client's tests with torch on the GPU (the driver version
#     now read through ctypes; the malformed-request and reflection tests
#     against the interceptors), kfuse_cuda_test and kfuse_client_test.
# Made here: build/gpu-bundle (bench/gpu/prepare.sh); .gpu/pysite (pip
# install --no-deps --target .gpu/pysite ./clients/python).
b=$PWD/build/gpu-bundle
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
x=$b/bin/kfuse_cross_test
timeout 570 $x --gtest_filter='GpuRowTest.*' > $OUT/row.txt 2>&1 & p1=$!
( timeout 300 $x --gtest_filter='GpuReduceTest.*' > $OUT/reduce.txt 2>&1
  timeout 250 $x --gtest_filter='GpuAttentionTest.*' > $OUT/attention.txt 2>&1 ) & p2=$!
( timeout 150 $x --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*' > $OUT/chains.txt 2>&1
  KFUSE_REDUCE_CHAINS=40 timeout 150 $x --gtest_filter='GpuReduceChainsTest.*' > $OUT/reduce_chains.txt 2>&1
  timeout 270 $x --gtest_filter='GpuMatmulTest.*' > $OUT/matmul.txt 2>&1 ) & p3=$!
$b/bin/kfuse_cuda_test > $OUT/cuda_test.txt 2>&1; echo "cuda_test rc=$?"; tail -1 $OUT/cuda_test.txt
$b/bin/kfuse_client_test --gtest_filter='ClientTest.*' > $OUT/client_test.txt 2>&1; echo "client_test rc=$?"; tail -1 $OUT/client_test.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -6 $OUT/python_tests.txt
wait $p3; echo "chains+reduce_chains+matmul rc=$?"; grep -hE "^\[ +(OK|FAILED|PASSED)" $OUT/chains.txt $OUT/reduce_chains.txt $OUT/matmul.txt
wait $p2; echo "reduce+attention rc=$?"; grep -hE "^\[ +(OK|FAILED|PASSED)" $OUT/reduce.txt $OUT/attention.txt
wait $p1; echo "row rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED)" $OUT/row.txt
