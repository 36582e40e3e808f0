#!/bin/bash
# run183: this stop's GPU-facing changes, the suites side by side:
# (1) the Python client's tests with torch on the GPU against the bundle's
#     kfused: Launcher.close() through the real driver, kfuse.torch's
#     ClientEnvironment (device, driver version);
# (2) kfuse_cuda_test and kfuse_client_test: InstalledDriverVersion()
#     against DriverVersion(), the C++ client filling the driver version;
# (3) the GPU suites whose outputs now come from gpu_test::PoisonedOutputs:
#     GpuRowTest, GpuReduceTest, GpuChainsTest, GpuLayoutTest and
#     GpuReduceChainsTest (40 seeds), every variant against fp64.
# Made here: build/gpu-bundle (bench/gpu/prepare.sh); .gpu/pysite (pip
# install --no-deps --target .gpu/pysite ./clients/python).
b=$PWD/build/gpu-bundle
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
x=$b/bin/kfuse_cross_test
timeout 560 $x --gtest_filter='GpuRowTest.*' > $OUT/row.txt 2>&1 & p1=$!
timeout 400 $x --gtest_filter='GpuReduceTest.*' > $OUT/reduce.txt 2>&1 & p2=$!
( timeout 200 $x --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*' > $OUT/chains.txt 2>&1
  KFUSE_REDUCE_CHAINS=40 timeout 200 $x --gtest_filter='GpuReduceChainsTest.*' > $OUT/reduce_chains.txt 2>&1 ) & p3=$!
$b/bin/kfuse_cuda_test > $OUT/cuda_test.txt 2>&1; echo "cuda_test rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED)" $OUT/cuda_test.txt | tail -4
$b/bin/kfuse_client_test --gtest_filter='ClientTest.*' > $OUT/client_test.txt 2>&1; echo "client_test rc=$?"; tail -1 $OUT/client_test.txt
python3 -c "import torch, google.protobuf, grpc; print('torch', torch.__version__, 'protobuf', google.protobuf.__version__, 'grpc', grpc.__version__, torch.cuda.get_device_name())"
KFUSED=$b/bin/kfused PYTHONPATH=$PWD/.gpu/pysite timeout 400 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -8 $OUT/python_tests.txt
wait $p3; echo "chains+reduce_chains rc=$?"; grep -hE "^\[ +(OK|FAILED|PASSED)" $OUT/chains.txt $OUT/reduce_chains.txt
wait $p2; echo "reduce rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED)" $OUT/reduce.txt
wait $p1; echo "row rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED)" $OUT/row.txt
