#!/bin/bash
# run214: at HEAD, the translation cases of kfuse.torch on the GPU
# (clients/python/tests/test_torch_fuse_gpu.py: every case against float64
# on fresh random inputs), then the two 50257-wide softmax cases of the row
# suite at the suite's 2670 rows and at 2640 and 2772 (20 and 21 whole
# rounds of the persistent blocks' rows): what the last partial round costs
# row/11's counter-fed kernels.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run214.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && xz -dc build/gpu-run214.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run214
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
KFUSED=$b/bin/kfused PYTHONPATH=$PWD/.gpu/pysite timeout 240 python3 -m pytest -q -s -rs \
  clients/python/tests/test_torch_fuse_gpu.py > $OUT/torch_fuse_gpu.txt 2>&1
echo "pytest rc=$? $((SECONDS - start)) s" >> $OUT/torch_fuse_gpu.txt
tail -4 $OUT/torch_fuse_gpu.txt
CASES=softmax_bf16_50257,softmax_f32_50257 SUITES=row BUDGET=3 SKIP_TESTS=1 TESTS_RESERVE=0 \
  SECONDS_TOTAL=300 bash bench/gpu/run.sh $b > $OUT/row_run.log 2>&1
grep -E '^\| [a-z]' $OUT/row_run.log | cut -d'|' -f2-9
cp bench/results/$(date +%F)-row.md bench/results/$(date +%F)-row.json $OUT/ 2>/dev/null
echo "total $((SECONDS - start)) s"
