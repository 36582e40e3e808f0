#!/bin/bash
# run168: the out-of-line element work and math (long chains) on the H200:
# GpuChainsTest (random chains and three 120-op chains, f32/f16/bf16, each
# variant tried against fp64 with eager's error as the bar) and
# GpuReduceTest (every variant of every reduce plan, now with a column sum
# after 80 ops: kf_relem and kf_sinf_ol / kf_sin_ol).
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 400 $b/bin/kfuse_cross_test --gtest_filter="GpuChains*:GpuReduce*:RandomChains*" > $OUT/gpu_tests.log 2>&1
echo "cross GPU tests rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|PASSED" $OUT/gpu_tests.log | tail -12
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -40
grep -E "long|long_chain" $OUT/gpu_tests.log | head -20
