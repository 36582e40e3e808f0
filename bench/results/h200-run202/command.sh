#!/bin/bash
# run202: the attention yardsticks (kReference64, kEager) with 8 query rows
# a block, each key's row of K read once for the block's rows (before: one
# row a block, K and V read from L2 for every query row; run200's recheck
# spent 27 s of each S = 16384 case in them). Made here from the working
# tree after d0334de: .gpu/yard/yard (nvcc -O3 -std=c++17 -arch=sm_90a,
# yard.cu; the sources it includes written by gen.cc linked against the
# codegen library before (old_*) and after (new_*) the change; r8_* from a
# draft of it with 2-byte loads of K and __launch_bounds__(128); all kept
# here beside yard.cu; v16_X.cu, for X in ref_big and eager_big, is
#   sed 's/new_X/v16_X/; s/kf_R = 8;/kf_R = 16;/' new_X.cu); and
# build/gpu-run202.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse_client_test, kfuse_cuda_test, kfuse_tuner_test and
# kfuse-plan-manifest).
# (1) yard: the old and new yardsticks on the same fresh random inputs,
#     outputs compared byte for byte, each timed once: a masked GQA chain
#     (causal, mask, lengths, lse; 300 x 260) and the S = 16384 bench shape;
#     the new ones (new_*: 8 rows a block, K's rows in 16-byte loads,
#     __launch_bounds__(128, 1)) beside, at S = 16384, the first draft
#     (r8_*: 8 rows, 2-byte loads of K) and a hand edit with 16 rows a block
#     (v16_*), all compared byte for byte with new_*;
# (2) GpuAttentionTest: every variant of the test chains against both
#     yardsticks, and the yardsticks against the CPU's fp64;
# (3) RECHECK=1 FAMILIES=attention bench/gpu/tune_sweep.sh: the attention
#     bench cases tuned (quick), then rebuilt from their decisions and
#     checked, times beside run200's.
mkdir -p /tmp/k && xz -dc build/gpu-run202.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run202
cuda=/usr/local/cuda-13.0/targets/x86_64-linux/lib
(cd .gpu/yard && timeout 200 ./yard) 2>&1 | tee $OUT/yard.txt
start=$SECONDS
LD_LIBRARY_PATH=$b/lib:$cuda timeout 200 $b/bin/kfuse_cross_test --gtest_filter='GpuAttention*' > $OUT/gpu_attention.txt 2>&1
echo "GpuAttentionTest rc $? $((SECONDS - start)) s"; grep -E "^\[  (FAILED|PASSED) |OK \]" $OUT/gpu_attention.txt
LD_LIBRARY_PATH=$cuda RECHECK=1 FAMILIES=attention bash bench/gpu/tune_sweep.sh $b "$OUT"
cat "$OUT/sweep.txt" "$OUT/recheck.txt" | grep -E "rc=|ok:|reusing"
