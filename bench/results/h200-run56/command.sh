#!/bin/bash
# The program (.gpu/mm/mmb) includes generated kernels: each source from
# gen.cc (h200-run58/gen.cc, linked against the build's codegen library:
# `gen M 'param=value,...'` prints the kernel of act(x @ w + bias) for x
# [M, 8192], w [8192, 8192]), entry renamed kf_entry, extern "C" dropped.
# main.cu (h200-run60/main.cu is the last version; this run's listed the
# kernels its output names) was built here with
#   nvcc -O3 -arch=sm_90a -std=c++17 -o mmb main.cu
# Split K over a cluster (matmul/4): the M = 64 tiled kernels with the
# workspace (and with the counters' memset the launchers add) beside their
# cluster twins and wider tiles (.gpu/mm/main.cu, generated source), ncu on
# a few, then GpuMatmulTest (every space variant, cluster twins included).
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
(cd .gpu/mm && timeout 60 ./mmb) 2>&1 | tee $OUT/mm.txt
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
(cd .gpu/mm && REPS=1 timeout 120 $ncu --clock-control none --kernel-name-base demangled -k regex:'t64|c64a|c64b|c64e' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats ./mmb) > $OUT/ncu_mm.txt 2>&1
echo "ncu rc $?"; grep -E "^  [a-zA-Z_:0-9]+.*\(|Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Warp Cycles Per Issued|Achieved Occupancy|SM Active Cycles|Elapsed Cycles" $OUT/ncu_mm.txt | head -60
timeout 330 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head -20
grep -B2 -A8 Failure $OUT/gpu_matmul_test.txt | head -40
