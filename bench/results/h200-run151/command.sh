#!/bin/bash
# run151: kfuse.torch's tests on the H200 with matmul/7 (the final tree of
# this stop), against float64.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
# .gpu/py/kfuse: build/py-venv-3.11/lib/python3.11/site-packages/kfuse (bash scripts/test-python)
KFUSED=$PWD/$b/bin/kfused PYTHONPATH=.gpu/py timeout 240 python3 -m pytest -p no:cacheprovider -q -rs clients/python/tests/test_torch_fuse.py -s > $OUT/python_torch_tests.txt 2>&1
echo "torch tests rc=$? at $((SECONDS - start)) s"
grep -E "passed|failed|FAILED|Error" $OUT/python_torch_tests.txt | tail -15
