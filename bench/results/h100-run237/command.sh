#!/bin/bash
# run237: inputs whose rows start off the dense rows' phase are read in
# vectors through windows (row/20: the two aligned vectors holding a
# vector's first and last elements, shifted into place), where they were
# read element by element. First the GPU tests: GpuRowTest's strided rows
# (every variant of thirteen chains against fp64, the inputs' gaps NaN;
# new: a weight, a bias and a mask broadcast beside peeled rows), the views
# cases of GpuReduceTest, kfuse.torch's slice and strided cases. Then the
# tuned times (kfuse tune --mode full) of the padded vocabulary's softmax as
# a slice (examples/padded_vocab_softmax_bf16.json) and as a strided input,
# beside its dense twin, and bench/gpu/strided_timing.py.
# Predicted: the padded vocabulary from run236's 407 us (vec 1) to within
# 5% of the dense twin (285 us on run235's H100).
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run237.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run237.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run237
r=bench/chains/strided_rows
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
( timeout 170 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest.Strided*' > $OUT/gpu_row_strided.txt 2>&1
  echo "row rc=$? $((SECONDS - start)) s" >> $OUT/gpu_row_strided.txt ) &
tests=($!)
( KFUSE_GPU_CASES=views timeout 170 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/gpu_reduce.txt 2>&1
  echo "reduce rc=$? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
tests+=($!)
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 170 python3 -m pytest -q \
  -p no:cacheprovider -rs clients/python/tests/test_torch_fuse_gpu.py -k "slice or strided" \
  > $OUT/python_tests.txt 2>&1
  echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
tests+=($!)
wait "${tests[@]}"  # Not kfused, still serving the timing below.
for f in examples/padded_vocab_softmax_bf16.json $r/vocab_strided_softmax_bf16.json $r/vocab_dense_softmax_bf16.json; do
  c=$(basename $f .json)
  timeout 25 $b/bin/kfuse --server=127.0.0.1:7431 --timeout=24 tune --mode full --budget 6 --force $f \
    > $OUT/tune_$c.txt 2>&1
  echo "tune rc=$? $((SECONDS - start)) s" >> $OUT/tune_$c.txt
done
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 80 python3 bench/gpu/strided_timing.py \
  > $OUT/strided_timing.txt 2>&1
echo "strided timing rc=$? $((SECONDS - start)) s" >> $OUT/strided_timing.txt
kill $kpid; wait $kpid 2>/dev/null
for c in padded_vocab_softmax_bf16 vocab_strided_softmax_bf16 vocab_dense_softmax_bf16; do
  echo "== $c"; grep -E "^state|variant|roofline|tune rc" $OUT/tune_$c.txt
done
for f in $OUT/gpu_row_strided.txt $OUT/gpu_reduce.txt; do
  tail -n 1 $f; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $f | head -20
done
tail -n 4 $OUT/python_tests.txt
cat $OUT/strided_timing.txt
