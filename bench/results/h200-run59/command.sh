#!/bin/bash
# The program (.gpu/mm/mmb) is h200-run60/main.cu (run59's lacked the n*
# kernels), built here with nvcc -O3 -arch=sm_90a -std=c++17 -o mmb main.cu;
# generated kernels from h200-run58/gen.cc (entry renamed kf_entry, extern
# "C" dropped). d16s2.cu: the double-buffered hand edit (d16s1: stages 1).
# Double-buffered batches in the streamed M = 16 kernel (hand-edited copies
# of the generated one: .gpu/mm/d16s1.cu, d16s2.cu; b16s4.cu, batches of
# four steps) beside the generated kernels, after a flush by reads and by a
# 256 MB memset (.gpu/mm/main.cu).
cd "$(dirname "$0")/.."
echo "== flush by reads"; (cd .gpu/mm && timeout 60 ./mmb) 2>&1 | tee $OUT/mm_read.txt
echo "== flush by writes"; (cd .gpu/mm && FLUSH_WRITE=1 timeout 60 ./mmb) 2>&1 | tee $OUT/mm_write.txt
