#!/bin/bash
# Cross-entropy with class labels (an iota along the rows, i64 labels read
# through a cast): GpuReduceTest (every variant of every kernel of twenty
# plans against fp64, the three cross-entropy chains new) and the bench
# cases; kfuse.torch's tests (F.cross_entropy and F.nll_loss with int64
# labels on the H200 among them); then the reduce suite's cross_entropy_bf16
# beside the soft-target loss.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 280 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*:BenchCases*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -20
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -60
KFUSED=$PWD/$b/bin/kfused PYTHONPATH=.gpu/py timeout 120 python3 -m pytest -p no:cacheprovider -q -rs clients/python/tests/test_torch_fuse.py -s > $OUT/python_torch_tests.txt 2>&1
echo "torch tests rc=$? at $((SECONDS - start)) s"
grep -E "passed|failed|FAILED|Error" $OUT/python_torch_tests.txt | tail -15
CASES=cross_entropy_bf16,soft_target_loss_bf16 SUITES=reduce BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=170 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "compiled in|FAILED|WRONG|rror" $OUT/reduce_run.log | head
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
mv $OUT/kfused.log $OUT/kfused_tune.log 2>/dev/null
ls $OUT; echo "total $((SECONDS - start)) s"
