#!/bin/bash
# run238: windows (two aligned vector reads, shifted into place) in two
# more places. Row kernels (row/20): a bulk-staged row of an input whose
# rows start off the dense rows' phase is copied from the 16-byte unit
# holding its first element and read from the buffer through windows, so
# the padded vocabulary's softmax may have its dense twin's bulk-staged
# schedule (run237: 343 us staged by the kernel; the dense twin 286 bulk-
# staged). Pointwise kernels (pointwise/4): consecutive operands off the
# vectors' alignment (a slice at an odd offset) are read through windows,
# not element by element. The GPU tests first: GpuRowTest's strided rows
# (fourteen chains, an f32 padded vocabulary among them, every variant
# against fp64, the inputs' gaps NaN), GpuReduceTest's views cases,
# GpuLayoutTest's named chains (the row differences x[:, 1:] - x[:, :-1]
# in bf16, f32, f16 among them), kfuse.torch's slice and strided cases.
# Then the tuned times of the padded vocabulary's softmax (as a slice and
# as a strided input, beside its dense twin) and of the row differences of
# a bf16 [16384, 4097] (bench/chains/strided_rows/row_diff_bf16.json), and
# bench/gpu/strided_timing.py.
# Predicted: the padded vocabulary at 290-300 us (within 5% of the dense
# twin's bulk-staged 286), its buffer read through windows, 2 shared-memory
# loads a vector where the dense kernel takes 1. The row differences (256
# MiB moved) at 0.9 of a copy or better (about 100 us), their vec-1
# variants in the same tune 1.3-1.6x slower.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run238.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run238.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run238
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
( timeout 170 $b/bin/kfuse_cross_test --gtest_filter='GpuLayoutTest.NamedChains*' > $OUT/gpu_layout.txt 2>&1
  echo "layout rc=$? $((SECONDS - start)) s" >> $OUT/gpu_layout.txt ) &
tests+=($!)
( KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 170 python3 -m pytest -q \
  -p no:cacheprovider -rs clients/python/tests/test_torch_fuse_gpu.py -k "slice or strided" \
  > $OUT/python_tests.txt 2>&1
  echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt ) &
tests+=($!)
wait "${tests[@]}"  # Not kfused, still serving the timing below.
for f in examples/padded_vocab_softmax_bf16.json $r/vocab_strided_softmax_bf16.json $r/vocab_dense_softmax_bf16.json \
    $r/row_diff_bf16.json; do
  echo "== $(basename $f .json)" >> $OUT/tunes.txt
  timeout 25 $b/bin/kfuse --server=127.0.0.1:7431 --timeout=24 tune --mode full --budget 6 --force $f \
    >> $OUT/tunes.txt 2>&1
  echo "tune rc=$? $((SECONDS - start)) s" >> $OUT/tunes.txt
done
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 80 python3 bench/gpu/strided_timing.py \
  > $OUT/strided_timing.txt 2>&1
echo "strided timing rc=$? $((SECONDS - start)) s" >> $OUT/strided_timing.txt
kill $kpid; wait $kpid 2>/dev/null
grep -E "^== |^state|variant|roofline|tune rc" $OUT/tunes.txt
for f in $OUT/gpu_row_strided.txt $OUT/gpu_reduce.txt $OUT/gpu_layout.txt; do
  tail -n 1 $f; grep -E "^\[ +(FAILED|PASSED|OK) |Failure" $f | head -20
done
tail -n 4 $OUT/python_tests.txt
cat $OUT/strided_timing.txt
