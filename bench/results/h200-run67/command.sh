#!/bin/bash
# Register-resident row kernels (the suite's tuned variants, generated) with
# L2 policies on their full-row stores and row loads, beside cudaMemcpy,
# after both flushes; DRAM bytes under Nsight Compute after the memset.
# Harness: main_rr.cu here (.gpu/rows/rr), built with nvcc -O3 -arch=sm_90a
# -std=c++17; kernels from h200-run66/rows_gen.cc (KIND=rms|ln selects the
# chain), post-processed by text substitution into the five forms. Result:
# no form beat the generated kernel (stores evict-first or .cs +1%, loads
# through ld.global.nc with or without a hint +5% to 3x).
cd "$(dirname "$0")/.."
(cd .gpu/rows && timeout 150 ./rr; FLUSH_WRITE=1 timeout 150 ./rr) 2>&1 | tee $OUT/rr.txt
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
(cd .gpu/rows && FLUSH_WRITE=1 REPS=2 timeout 200 $ncu --cache-control none --clock-control none \
  --kernel-name-base demangled -k regex:'rms32_|sm16_' \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum ./rr) > $OUT/rr_ncu.txt 2>&1
grep -E "kf_entry|dram__|duration" $OUT/rr_ncu.txt | sed -E 's/\(const.*\) \(/ (/' | head -80
