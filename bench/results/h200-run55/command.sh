#!/bin/bash
# The program (.gpu/mm/mmb) includes generated kernels: each source from
# gen.cc (h200-run58/gen.cc, linked against the build's codegen library:
# `gen M 'param=value,...'` prints the kernel of act(x @ w + bias) for x
# [M, 8192], w [8192, 8192]), entry renamed kf_entry, extern "C" dropped.
# main.cu (h200-run60/main.cu is the last version; this run's listed the
# kernels its output names) was built here with
#   nvcc -O3 -arch=sm_90a -std=c++17 -o mmb main.cu
# Few-row matmul schedules side by side: generated kernels of the space and
# outside it (.gpu/mm/main.cu), best/median of 20 with L2 flushed by reads,
# then ncu (SOL, memory, warp states) on one launch each.
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
(cd .gpu/mm && timeout 60 ./mmb) 2>&1 | tee $OUT/mm.txt
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
(cd .gpu/mm && REPS=1 timeout 200 $ncu --clock-control none -k regex:'kf_entry|read_' --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --metrics lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,dram__bytes_read.sum ./mmb) > $OUT/ncu_mm.txt 2>&1
echo "ncu rc $?"; grep -E "^  [a-zA-Z_:0-9]+.*\(|Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Max Bandwidth|lts__t_sectors|l1tex__t_sectors|dram__bytes|Stall Long|Warp Cycles Per Issued|Achieved Occupancy" $OUT/ncu_mm.txt | head -120
