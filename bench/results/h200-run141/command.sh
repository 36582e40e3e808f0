#!/bin/bash
# run141: kfuse.torch's tests on the H200 with row/13 (picks of computed
# values): F.cross_entropy and F.nll_loss(F.log_softmax) through the fx and
# the aten traces among them, against float64.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
KFUSED=$PWD/$b/bin/kfused PYTHONPATH=.gpu/py timeout 240 python3 -m pytest -p no:cacheprovider -q -rs clients/python/tests/test_torch_fuse.py -s > $OUT/python_torch_tests.txt 2>&1
echo "torch tests rc=$? at $((SECONDS - start)) s"
grep -E "passed|failed|FAILED|Error" $OUT/python_torch_tests.txt | tail -15
ls $OUT; echo "total $((SECONDS - start)) s"
