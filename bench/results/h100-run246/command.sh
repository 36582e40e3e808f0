#!/bin/bash
# run246: last session's client and row-kernel work, first time on a GPU.
# (1) GpuMatmulTest's plans and GpuLayoutTest's named chains (row kernels
# reading reshapes of inputs in place, pointwise over a reshape's finer
# shape); (2) the client's GPU tests of group norm, batch norm, the
# backend's declined products, the attention between projections and the
# composites, against float64; (3) bench/gpu/ops_timing.py (interleaved
# rotary, GroupNorm + SiLU, batch norm + residual + ReLU beside eager,
# torch.compile and a copy); (4) bench/gpu/attention_block_timing.py (the
# backend's default leaving products and attention to PyTorch).
# Predicted: interleaved rotary 0.35-0.6 of copy, 2-3x eager; GroupNorm +
# SiLU 1.4-1.7x eager; BN + residual + ReLU 2-2.5x eager; attention block
# through the backend's default 0.97-1.03x eager (0.5-0.65x fused);
# pre-norm sublayer 1.00-1.03x.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run246.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run246.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run246
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
cp .gpu/run246.sh $OUT/command.sh
start=$SECONDS
timeout 150 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest.Plans*:GpuLayoutTest.NamedChains*' > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$? $((SECONDS - start)) s" >> $OUT/gpu_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 150 python3 -m pytest -q \
  -p no:cacheprovider -rs -m gpu -k "group_norm or batch_norm or products_left or attention_between or composites" \
  clients/python/tests > $OUT/python_tests.txt 2>&1
echo "python tests rc=$? $((SECONDS - start)) s" >> $OUT/python_tests.txt
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store.db > $OUT/kfused.log 2>&1 &
kpid=$!; sleep 3
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 120 python3 bench/gpu/ops_timing.py > $OUT/ops_timing.txt 2>&1
echo "ops timing rc=$? $((SECONDS - start)) s" >> $OUT/ops_timing.txt
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 150 python3 bench/gpu/attention_block_timing.py > $OUT/attention_block_timing.txt 2>&1
echo "attention block rc=$? $((SECONDS - start)) s" >> $OUT/attention_block_timing.txt
kill $kpid; wait $kpid 2>/dev/null
grep -E "^\[ +(FAILED|PASSED) |Failure|rc=" $OUT/gpu_tests.txt | tail -8
grep -E "FAILED|Error|passed|failed|rc=" $OUT/python_tests.txt | tail -12
cat $OUT/ops_timing.txt $OUT/attention_block_timing.txt | tail -60
