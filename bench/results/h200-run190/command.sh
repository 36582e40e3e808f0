#!/bin/bash
# run190: a candidate's outputs judged again after its timed runs (a kernel
# right once by chance fails): the GPU tests of kfuse_tuner_test (with
# RunnerGpuTest.AKernelRightOnlyOnceFailsAfterTiming), kfuse_cuda_test, and
# the Python client's tests with torch against a kfused that tunes.
# Made here: build/gpu-run190 (bench/gpu/prepare.sh, the bundle less
# kfuse_cross_test, kfuse_client_test and kfuse-plan-manifest); .gpu/pysite
# (pip install --no-deps --target .gpu/pysite ./clients/python).
b=$PWD/build/gpu-run190
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
{ timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"
  $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)|RightOnlyOnce" $OUT/service_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -4 $OUT/python_tests.txt
