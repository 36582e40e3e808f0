#!/bin/bash
# run188: at 5cd97f1, the service-level GPU tests again after the store
# changes that followed run187 (schema 3 links, LookupOrMiss, the
# non-waiting listing) and the updated Python delete test: kfuse_cuda_test,
# kfuse_tuner_test, kfuse_client_test, and the Python client's tests with
# torch against a kfused that tunes on the H200.
# Made here: build/gpu-run188 (bench/gpu/prepare.sh, then kfuse_cross_test
# and kfuse-plan-manifest removed to fit the carry); .gpu/pysite (pip
# install --no-deps --target .gpu/pysite ./clients/python).
b=$PWD/build/gpu-run188
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$b/bin/kfuse_cuda_test > $OUT/cuda_test.txt 2>&1; echo "cuda_test rc=$?"; tail -1 $OUT/cuda_test.txt
timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*' > $OUT/tuner_test.txt 2>&1; echo "tuner_test rc=$?"; tail -1 $OUT/tuner_test.txt
$b/bin/kfuse_client_test --gtest_filter='ClientTest.*' > $OUT/client_test.txt 2>&1; echo "client_test rc=$?"; tail -1 $OUT/client_test.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -4 $OUT/python_tests.txt
