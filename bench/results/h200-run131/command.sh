#!/bin/bash
# kfuse.torch translating full reductions and F.mse_loss (and every other
# torch test): the Python client's torch tests, GPU ones included, against
# a kfused on loopback (the heuristic kernels, launched on the H200).
# .gpu/py: the kfuse package scripts/test-python installs, copied from
# build/py-venv-*/lib/python*/site-packages/kfuse.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
b=$PWD/build/gpu-bundle/bin
start=$SECONDS
KFUSED=$b/kfused PYTHONPATH=.gpu/py timeout 200 python3 -m pytest -p no:cacheprovider -q -rs clients/python/tests/test_torch_fuse.py -s > $OUT/python_torch_tests.txt 2>&1
echo "rc=$? at $((SECONDS - start)) s"
grep -E "passed|failed|FAILED|Error" $OUT/python_torch_tests.txt | tail -15
