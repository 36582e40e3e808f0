#!/bin/bash
# run235: rows read at strides of their own. A chain input at strides (a
# padded vocabulary, a transpose) and a slice of a dense input that keeps
# the vectors' phase (one of a fused projection's q, k, v) are read in
# place by one row kernel. First the GPU tests:
# GpuRowTest.StridedRowsMatchReference (every variant of ten chains against
# fp64, the inputs' gaps NaN), GpuReduceTest's views beside reductions
# (every kernel's every variant; a view between two reductions among them)
# and outputs reducing rows of two shapes; kfuse.torch's slice, transpose,
# strided-input and dynamic-rows cases on the GPU against float64. Then
# bench/gpu/strided_timing.py: kfuse.torch on non-contiguous inputs read in
# place, against the same after .contiguous() and eager;
# bench/gpu/dynamic_rows_timing.py: fuse(dynamic=True) against a plan per
# row count and eager. Last the tuned times (kfuse tune --mode full) of
# examples/qk_norm_slice_bf16.json, examples/padded_vocab_softmax_bf16.json
# and the chains in bench/chains/strided_rows: the sliced QK norm beside the
# same norm of a dense [tokens, 1024]; the padded vocabulary's softmax as a
# strided input (one kernel, element by element), as a slice (a pointwise
# copy, then the row kernel) and dense; a transposed f32 softmax.
# STRIDED_ONLY=1 stops after the strided timing; TESTS_ONLY=1 after the tests.
# Run on 2026-12-07 (an H100) as `STRIDED_ONLY=1 bash command.sh`, then, on
# the same machine, command2.sh (the tuned times and the dynamic rows).
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run235.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run235.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run235
r=bench/chains/strided_rows
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
( timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest.Strided*' > $OUT/gpu_row_strided.txt 2>&1
  echo "row rc=$? $((SECONDS - start)) s" >> $OUT/gpu_row_strided.txt ) &
tests=($!)
( KFUSE_GPU_CASES=views,two_row_shapes timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/gpu_reduce.txt 2>&1
  echo "reduce rc=$? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
tests+=($!)
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 150 python3 -m pytest -q \
  -p no:cacheprovider -rs clients/python/tests/test_torch_fuse_gpu.py clients/python/tests/test_torch_fuse.py \
  -k "slice or transposed or strided or dynamic" > $OUT/python_tests.txt 2>&1
  echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
tests+=($!)
wait "${tests[@]}"  # Not kfused, still serving the timing below.
if [ -n "${TESTS_ONLY:-}" ]; then  # TESTS_ONLY=1: the tests alone, under 160 s.
  kill $kpid
  for f in $OUT/gpu_row_strided.txt $OUT/gpu_reduce.txt; do tail -n 1 $f; grep -E "Failure" $f | head; done
  tail -n 4 $OUT/python_tests.txt
  exit 0
fi
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 80 python3 bench/gpu/strided_timing.py \
  > $OUT/strided_timing.txt 2>&1
echo "strided timing rc=$? $((SECONDS - start)) s" >> $OUT/strided_timing.txt
if [ -n "${STRIDED_ONLY:-}" ]; then  # STRIDED_ONLY=1: the tests and the strided timing, under 250 s.
  kill $kpid
  for f in $OUT/gpu_row_strided.txt $OUT/gpu_reduce.txt; do tail -n 1 $f; grep -E "Failure" $f | head; done
  tail -n 4 $OUT/python_tests.txt
  cat $OUT/strided_timing.txt
  exit 0
fi
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 100 python3 bench/gpu/dynamic_rows_timing.py \
  > $OUT/dynamic_rows_timing.txt 2>&1
echo "dynamic rows timing rc=$? $((SECONDS - start)) s" >> $OUT/dynamic_rows_timing.txt
for f in $r/vocab_strided_softmax_bf16.json examples/padded_vocab_softmax_bf16.json $r/vocab_dense_softmax_bf16.json \
    examples/qk_norm_slice_bf16.json $r/qk_norm_dense_bf16.json $r/transposed_softmax_f32.json; do
  c=$(basename $f .json)
  timeout 25 $b/bin/kfuse --server=127.0.0.1:7431 --timeout=24 tune --mode full --budget 6 --force $f \
    > $OUT/tune_$c.txt 2>&1
  echo "tune rc=$? $((SECONDS - start)) s" >> $OUT/tune_$c.txt
done
kill $kpid; wait $kpid 2>/dev/null
for c in qk_norm_slice_bf16 qk_norm_dense_bf16 vocab_strided_softmax_bf16 padded_vocab_softmax_bf16 \
    vocab_dense_softmax_bf16 transposed_softmax_f32; do
  echo "== $c"; grep -E "^plan|^state|variant|roofline|tune rc" $OUT/tune_$c.txt
done
for f in $OUT/gpu_row_strided.txt $OUT/gpu_reduce.txt; do
  tail -n 1 $f; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $f | head -20
done
tail -n 4 $OUT/python_tests.txt
cat $OUT/strided_timing.txt $OUT/dynamic_rows_timing.txt
echo "total $((SECONDS - start)) s"
