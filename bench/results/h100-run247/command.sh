#!/bin/bash
# run247: attention reading Q, K and V as slices of one buffer (a fused
# projection's) and storing its output laid out (heads back between the
# tokens and the head dim), so an attention block is three kernels (QKV
# product, attention, output product) where it was seven; matmuls over
# reshapes merging batch dims (ATen's bmm lowering) read as the product
# over those dims, so attention written out and traced by ATen is one
# attention kernel; k and v repeated over query-head groups (repeat_kv)
# read at head h / G by the attention kernel, no copy. LayerNorm over
# [C, H, W]. The backend's float32 products eager (SDPA's 3-D math form).
# (1) GpuAttentionTest (every variant, a packed causal
# case new) and GpuMatmulTest's plans (the attention block among them)
# against the CPU's fp64 evaluator; (2) the client's GPU tests of
# attention (between projections, written out in fx and ATen traces), the
# composites (softmax_with_dtype against float64 of the rounded input
# now) and the backend's products left to PyTorch (4-D SDPA now: on 3-D
# tensors SDPA is torch's math path); (3) [bench/gpu/ops_timing.py left
# out: little device time was left] (the
# device's figures); (4) bench/gpu/attention_block_timing.py (4-D heads).
# Predicted: the block fused from 0.5-0.65x eager to 0.55-0.7x (4 copies,
# about 256 MB and four launches, gone: 70-100 us at 4096 x 4096); the
# backend's default 0.97-1.03x eager.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run247.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run247.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run247
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
cp .gpu/run247.sh $OUT/command.sh
start=$SECONDS
timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuAttentionTest.*:GpuMatmulTest.Plans*' > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $((SECONDS - start)) s" >> $OUT/gpu_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 120 python3 -m pytest -q \
  -p no:cacheprovider -rs -m gpu -k "attention or composites or products_left or math_form or several_dims or repeated_kv" \
  clients/python/tests > $OUT/python_tests.txt 2>&1
echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 150 python3 bench/gpu/attention_block_timing.py > $OUT/attention_block_timing.txt 2>&1
echo "attention block rc=$? $((SECONDS - start)) s" >> $OUT/attention_block_timing.txt
kill $kpid; wait $kpid 2>/dev/null
grep -E "^\[ +(FAILED|PASSED) |Failure|rc=" $OUT/gpu_tests.txt | tail -8
grep -E "FAILED|Error|passed|failed|rc=" $OUT/python_tests.txt | tail -12
tail -40 $OUT/attention_block_timing.txt
