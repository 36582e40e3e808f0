#!/bin/bash
# run184: after the review fixes and the pointwise fix (8456cee: a group
# that lists its results writes those outputs only), side by side:
# (1) the Python client's tests with torch on the GPU (Launcher.close() now
#     raising on any unload the driver refuses), KFUSE_CLI set this time;
# (2) the suites whose plans hold pointwise kernels: GpuChainsTest,
#     GpuLayoutTest, GpuReduceTest, GpuReduceChainsTest (40 seeds) and
#     GpuMatmulTest.PlansOfSeveralKernelsMatchReference, against fp64.
# Made here: build/gpu-bundle (bench/gpu/prepare.sh); .gpu/pysite (pip
# install --no-deps --target .gpu/pysite ./clients/python).
b=$PWD/build/gpu-bundle
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
x=$b/bin/kfuse_cross_test
timeout 400 $x --gtest_filter='GpuReduceTest.*' > $OUT/reduce.txt 2>&1 & p1=$!
( timeout 200 $x --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*:GpuMatmulTest.PlansOfSeveralKernelsMatchReference' > $OUT/chains.txt 2>&1
  KFUSE_REDUCE_CHAINS=40 timeout 200 $x --gtest_filter='GpuReduceChainsTest.*' > $OUT/reduce_chains.txt 2>&1 ) & p2=$!
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -6 $OUT/python_tests.txt
wait $p2; echo "chains+reduce_chains rc=$?"; grep -hE "^\[ +(OK|FAILED|PASSED)" $OUT/chains.txt $OUT/reduce_chains.txt
wait $p1; echo "reduce rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED)" $OUT/reduce.txt
