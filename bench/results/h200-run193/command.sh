#!/bin/bash
# run193: after the review fixes of this stop (eaf740f): the GPU tests of
# kfuse_tuner_test and the Python client's tests with torch (with
# kfuse.torch's eager fallback on INTERNAL) against a kfused that tunes.
# Made here: build/gpu-run193 (bench/gpu/prepare.sh, the bundle less
# kfuse_cross_test, kfuse_client_test and kfuse-plan-manifest); .gpu/pysite.
b=$PWD/build/gpu-run193
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
{ timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -2 $OUT/python_tests.txt
grep -E "server_failure|PASSED|FAILED" $OUT/python_tests.txt | head -5
