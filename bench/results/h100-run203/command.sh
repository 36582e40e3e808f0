#!/bin/bash
# Ran at 6163abc on an NVIDIA H100 (80 GB HBM3): all passed
# (cuda 6, client 244, tuner GPU 42, GpuReduce* 2 in 260 s, GpuChains* +
# GpuMatmulTest.Plans* + GpuAttention* 5 in 154 s, Python 276 passed and
# 3 skipped in 77 s). Since 52d77ba: staged plans store every result of the same
# rows in one kernel (GpuReduceChainsTest and GpuReduceTest, added here, run
# such plans); a matmul operand's kernel writes the outputs of its rows, and
# the trailing kernel reads stored operands
# (GpuMatmulTest.PlansOfSeveralKernelsMatchReference, added here, now checks
# every output and has both plans, and outputs [M, 1] and [1, N] beside a
# product, now a trailing kernel each).
# run203: HEAD as a whole on the GPU: kfuse_cuda_test, kfuse_client_test,
# the GPU tests of kfuse_tuner_test (the real worker's cancel among them,
# and a ceilings measurement cancelled mid-run,
# RunnerGpuTest.ACancelledCeilingsMeasurementStopsAndTheGpuMeasuresAgain),
# then the Python client's tests with torch against a
# kfused that tunes (kfuse.torch, the CLI, the tune stream's kernel fields,
# health while tuning); GpuAttentionTest with the review's chains of 3
# and 1 query rows (yardsticks of fewer rows a block, Dv != D); and
# GpuChainsTest, whose random chains include one of outputs whose shapes do
# not nest (now a plan of two pointwise kernels).
# Made here: build/gpu-run203.tar.xz (bench/gpu/prepare.sh, the whole bundle
# packed with xz); .gpu/pysite
# (pip install --no-deps --target .gpu/pysite ./clients/python).
[ -d /tmp/k/gpu-run203 ] || { mkdir -p /tmp/k && xz -dc build/gpu-run203.tar.xz | tar -C /tmp/k -xf -; } || exit 1
b=/tmp/k/gpu-run203
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
# The service-side GPU tests alone (some time a hang or measure the GPU),
# then three groups at once, each within its own limit: the reduction
# tests; the chains, matmul plans and attention; the Python tests.
start=$SECONDS
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  $b/bin/kfuse_client_test; echo "client_test rc=$?"
  timeout 200 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1
( timeout 280 $b/bin/kfuse_cross_test --gtest_filter='GpuReduce*' > $OUT/gpu_reduce.txt 2>&1
  echo "GpuReduceTest, GpuReduceChainsTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
( timeout 280 $b/bin/kfuse_cross_test --gtest_filter='GpuChains*:GpuMatmulTest.Plans*:GpuAttention*' > $OUT/gpu_chains.txt 2>&1
  echo "GpuChainsTest, GpuMatmulTest.Plans*, GpuAttentionTest rc $? $((SECONDS - start)) s" >> $OUT/gpu_chains.txt ) &
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 200 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
wait
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
for f in gpu_reduce gpu_chains; do tail -1 $OUT/$f.txt; grep -E "^\[  (FAILED|PASSED) |Failure" $OUT/$f.txt | head; done
tail -3 $OUT/python_tests.txt
