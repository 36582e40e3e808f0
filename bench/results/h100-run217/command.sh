#!/bin/bash
# run217: at 51a6f8c (HEAD; row/17's kernels), every GPU test of the
# cross and tuner binaries (kernels against fp64 or a reference on fresh
# random inputs), and kfuse.torch's translation test: run214's failing draw
# (seed 1972154537 of full_reductions) replayed with row/16's kfused (run214's
# bundle) and row/17's side by side, then 200 fresh draws of that case with
# each, then the whole file once at HEAD.
# Made here: bash bench/gpu/prepare.sh; build/gpu-bundle packed as
# build/gpu-run217.tar.xz; .gpu/pysite by
# pip install --no-deps --target .gpu/pysite ./clients/python.
mkdir -p /tmp/k && for r in 214 217; do xz -dc build/gpu-run$r.tar.xz | tar -C /tmp/k -xf - || exit 1; done
b=/tmp/k/gpu-run217
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/device.txt
start=$SECONDS
t() { # name, limit, binary, filter
  ( timeout $2 $b/bin/$3 --gtest_filter="$4" > $OUT/$1.txt 2>&1
    echo "$1 rc $? $((SECONDS - start)) s" >> $OUT/$1.txt ) &
}
t gpu_row 500 kfuse_cross_test 'GpuRowTest.*'
t gpu_matmul_attn 500 kfuse_cross_test 'GpuMatmulTest.*:GpuAttentionTest.*'
t gpu_rest 500 kfuse_cross_test 'GpuChains*:GpuLayout*:GpuReduce*:RandomChains*:NvmlGpu*:RunnerPoolGpu*:GpuLoad*'
t gpu_tuner 500 kfuse_tuner_test '*Gpu*'
py() { # name, bundle, env...
  local name=$1 bundle=$2; shift 2
  env "$@" KFUSED=/tmp/k/$bundle/bin/kfused LD_LIBRARY_PATH=/tmp/k/$bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib \
    PYTHONPATH=$PWD/.gpu/pysite timeout 200 python3 -m pytest -q -s -rs -p no:cacheprovider \
    $PYTEST_K clients/python/tests/test_torch_fuse_gpu.py > $OUT/$name.txt 2>&1
  echo "$name rc=$? $((SECONDS - start)) s" >> $OUT/$name.txt
}
PYTEST_K="-k full_reductions"
py seed_row16 gpu-run214 KFUSE_TEST_SEED=1972154537
py seed_row17 gpu-run217 KFUSE_TEST_SEED=1972154537
py draws_row16 gpu-run214 KFUSE_TEST_DRAWS=200
py draws_row17 gpu-run217 KFUSE_TEST_DRAWS=200
PYTEST_K=""
py torch_fuse_gpu gpu-run217
wait
for f in seed_row16 seed_row17; do grep -h "^full_reductions\|passed\|failed\|rc=" $OUT/$f.txt | tail -n 4; done
for f in draws_row16 draws_row17 torch_fuse_gpu; do tail -n 3 $OUT/$f.txt; done
for f in gpu_row gpu_matmul_attn gpu_rest gpu_tuner; do tail -n 1 $OUT/$f.txt; grep -E "^\[  (FAILED|PASSED) |tests ran" $OUT/$f.txt | head -8; done
echo "total $((SECONDS - start)) s"
