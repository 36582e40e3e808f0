#!/bin/bash
# run236: a slice whose padding moves the vectors' phase (a padded
# vocabulary, x[:, 3:m-2]) is now read in place by its row kernel, element
# by element, instead of stored first by a pointwise kernel. GpuReduceTest's
# views cases (views_slice_softmax_bf16 is now one kernel reading the slice
# in place), kfuse.torch's slice cases, then the tuned padded vocabulary's
# softmax (examples/padded_vocab_softmax_bf16.json), whose plan is now one
# kernel: expected at the strided input's 408 us of run235, against 659.
mkdir -p /tmp/k && xz -dc build/gpu-run236.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run236
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
( KFUSE_GPU_CASES=views timeout 120 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/gpu_reduce.txt 2>&1
  echo "reduce rc=$? $((SECONDS - start)) s" >> $OUT/gpu_reduce.txt ) &
t1=$!
timeout 25 $b/bin/kfuse --server=127.0.0.1:7431 --timeout=24 tune --mode full --budget 6 --force \
  examples/padded_vocab_softmax_bf16.json > $OUT/tune_padded_vocab_softmax_bf16.txt 2>&1
echo "tune rc=$? $((SECONDS - start)) s" >> $OUT/tune_padded_vocab_softmax_bf16.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 60 python3 -m pytest -q \
  -p no:cacheprovider -rs clients/python/tests/test_torch_fuse_gpu.py -k "slice" > $OUT/python_tests.txt 2>&1
echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt
wait $t1
kill $kpid
grep -E "^plan|^state|variant|roofline|tune rc" $OUT/tune_padded_vocab_softmax_bf16.txt
grep -E "kernels,|^\[ +(FAILED|PASSED|OK) |Failure|rc=" $OUT/gpu_reduce.txt | head -30
tail -n 3 $OUT/python_tests.txt
