#!/bin/bash
# run179, in one call:
# (1) M = 64 (8192 x 8192 bf16 weights, bias + tanh-GELU): the untried shape
#     from docs/performance.md, by hand (xs.cu): the streamed kernel's
#     weights by ld.global.nc.L1::no_allocate into the mma operands, a ring of
#     D k16 half-steps in registers (refilled before the products, l0, or
#     after them, l1), x staged in a per-warp cp.async ring of XS [64 x 32]
#     slices in shared memory; beside the heuristic's 64 x 128 cluster tile
#     (h) and the generated streamed kernel with x in registers (s64w1k8);
#     after a 256 MB memset and after a flush by reads, twice. xs.cu's SASS.
# (2) GpuReduceTest (every variant of every reduction plan against fp64; cut
#     off in run178) and GpuReduceChainsTest over 120 seeds, after the
#     partition refinement 3950e73, the two side by side after (1).
# Built here (.gpu/m64): gen.cc (h200-run153) and nvc.cc (sass-matmul5) for
# h.cubin and s64w1k8.cubin; nvcc -O3 -std=c++17 -arch=sm_90a -cubin -o
# xs.cubin xs.cu; mmr from h200-run153/main.cu (nvcc ... -lcuda).
b=$PWD/build/gpu-bundle
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
od=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
( cd .gpu/m64 && for i in 1 2; do timeout 120 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
  $od -sass xs.cubin > $OUT/xs.sass 2>&1 )
KFUSE_REDUCE_CHAINS=120 timeout 300 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceChainsTest.*' > $OUT/reduce_chains.txt 2>&1 &
rc_pid=$!
timeout 400 $b/bin/kfuse_cross_test --gtest_filter='GpuReduceTest.*' > $OUT/reduce.txt 2>&1
echo "reduce rc=$?"; grep -E "^\[ +(OK|FAILED|PASSED)" $OUT/reduce.txt
wait $rc_pid; echo "reduce chains rc=$?"; tail -4 $OUT/reduce_chains.txt
