#!/bin/bash
# Streamed few-row kernels: a ring of steps against batches, and the read
# pattern alone, in one program (main.cu). gen_s3.cu is matmul/3's first
# generated kernel (M = 16, a ring of three steps); gen_m1.cu its M = 1
# kernel, batch_s2.cu and nomma_s3.cu hand-edited copies (each kept as a
# patch of gen_s3.cu: patch -o F.cu gen_s3.cu F.patch). The others:
#   sed 's/kf_STAGES = 3/kf_STAGES = 2/; s/k_gen_s3/k_gen_s2/' gen_s3.cu > gen_s2.cu
#   sed 's/kf_STAGES = 3/kf_STAGES = 4/; s/k_gen_s3/k_gen_s4/' gen_s3.cu > gen_s4.cu
#   sed 's/kf_STAGES = 2/kf_STAGES = 3/; s/k_batch_s2/k_batch_s3/' batch_s2.cu > batch_s3.cu
#   sed 's/kf_STAGES = 2/kf_STAGES = 4/; s/k_batch_s2/k_batch_s4/' batch_s2.cu > batch_s4.cu
# Built here: nvcc -O3 -arch=sm_90a -std=c++17 -o gs main.cu
cd "$(dirname "$0")/.."
timeout 60 .gpu/gs/gs > $OUT/gs.txt 2>&1; echo "gs rc $?"; cat $OUT/gs.txt
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
timeout 150 $ncu --clock-control none -k regex:'k_gen_s3|k_batch_s2|read_ours' -c 4 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  .gpu/gs/gs > $OUT/ncu_gs.txt 2>&1
echo "ncu rc $?"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Issue Slots Busy|No Eligible|L2 Hit|Stall Long|Warp Cycles Per Issued" $OUT/ncu_gs.txt | head -40
if [ -f .gpu/softmax_wide/READY ]; then
  timeout 100 .gpu/softmax_wide/softmax_wide_bench >$OUT/softmax_wide.txt 2>&1
  echo "softmax_wide rc $?"; tail -14 $OUT/softmax_wide.txt
fi
