#!/bin/bash
# The C++ launcher's scratch from the stream-ordered pool (cuMemAllocAsync,
# cuMemFreeAsync): GpuRowTest (bulk rows' counters are workspaces) and the
# chains' launcher tests.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 285 $b/bin/kfuse_cross_test --gtest_filter='GpuRowTest*:GpuChainsTest.SymbolicPlan*:GpuChainsTest.Launcher*' >$OUT/gpu_row_test.txt 2>&1
echo "rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_row_test.txt | head
grep -B2 -A10 Failure $OUT/gpu_row_test.txt | head -30
