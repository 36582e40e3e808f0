#!/bin/bash
# Not run yet: no GPU machine was available since it was written. Run it at
# the HEAD of the day it runs.
# run203: HEAD as a whole on the H200: kfuse_cuda_test, kfuse_client_test,
# the GPU tests of kfuse_tuner_test (the real worker's cancel among them,
# and a ceilings measurement cancelled mid-run,
# RunnerGpuTest.ACancelledCeilingsMeasurementStopsAndTheGpuMeasuresAgain),
# then the Python client's tests with torch against a
# kfused that tunes (kfuse.torch, the CLI, the tune stream's kernel fields,
# health while tuning); GpuAttentionTest with the review's chains of 3
# and 1 query rows (yardsticks of fewer rows a block, Dv != D); and
# GpuChainsTest, whose random chains include one of outputs whose shapes do
# not nest (now a plan of two pointwise kernels).
# Made here: build/gpu-run203.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse-plan-manifest, packed with xz); .gpu/pysite
# (pip install --no-deps --target .gpu/pysite ./clients/python).
mkdir -p /tmp/k && xz -dc build/gpu-run203.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run203
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  $b/bin/kfuse_client_test; echo "client_test rc=$?"
  timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
start=$SECONDS
timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuAttention*:GpuChains*' > $OUT/gpu_attention.txt 2>&1
echo "GpuAttentionTest, GpuChainsTest rc $? $((SECONDS - start)) s"; grep -E "^\[  (FAILED|PASSED) |Failure" $OUT/gpu_attention.txt | head
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -4 $OUT/python_tests.txt
