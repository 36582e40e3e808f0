#!/bin/bash
# run189: after this stop's changes to the check (bool and integer outputs
# held to eager's count of differing elements, KfPart's new field on the
# GPU; intermediates drawn from their nodes' domains; a seed measured wrong
# not served) and to the worker's supervision (send deadlines, bounded
# frames, Kill that does not wait on a stuck child), on the H200:
# the kernel suites against fp64 on fresh inputs (row, reduce, attention,
# chains and layouts, matmul), kfuse_cuda_test, the GPU tests of
# kfuse_tuner_test, kfuse_client_test, and the Python client's tests with
# torch against a kfused that tunes.
# Made here: build/gpu-run189.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse-plan-manifest, packed with xz to fit the carry); .gpu/pysite (pip
# install --no-deps --target .gpu/pysite ./clients/python).
mkdir -p /tmp/k && xz -dc build/gpu-run189.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run189
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
x=$b/bin/kfuse_cross_test
timeout 560 $x --gtest_filter='GpuRowTest.*' > $OUT/row.txt 2>&1 & p1=$!
( timeout 300 $x --gtest_filter='GpuReduceTest.*' > $OUT/reduce.txt 2>&1
  timeout 250 $x --gtest_filter='GpuAttentionTest.*' > $OUT/attention.txt 2>&1 ) & p2=$!
( timeout 150 $x --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*:GpuReduceChainsTest.*' > $OUT/chains.txt 2>&1
  timeout 270 $x --gtest_filter='GpuMatmulTest.*' > $OUT/matmul.txt 2>&1 ) & p3=$!
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"
  $b/bin/kfuse_client_test --gtest_filter='ClientTest.*'; echo "client_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -4 $OUT/python_tests.txt
wait $p3; echo "chains+matmul rc=$?"; grep -hE "^\[ +(FAILED|PASSED)" $OUT/chains.txt $OUT/matmul.txt
wait $p2; echo "reduce+attention rc=$?"; grep -hE "^\[ +(FAILED|PASSED)" $OUT/reduce.txt $OUT/attention.txt
wait $p1; echo "row rc=$?"; grep -E "^\[ +(FAILED|PASSED)" $OUT/row.txt
