#!/bin/bash
# The program (.gpu/mm/mmb) is h200-run60/main.cu (run59's lacked the n*
# kernels), built here with nvcc -O3 -arch=sm_90a -std=c++17 -o mmb main.cu;
# generated kernels from h200-run58/gen.cc (entry renamed kf_entry, extern
# "C" dropped). d16s2.cu: the double-buffered hand edit (d16s1: stages 1).
# The "max |out14 - s16|" line compares a buffer no kernel wrote (a kernel
# dropped from the list); the others compare each M = 16 kernel with s16.
# Streamed M = 16 kernels whose warps split N, not K (wn 2-8), K split over
# a cluster, so the warps of a CTA share A's loads through L1 (generated
# source, .gpu/mm/n*.cu), beside the others, after both flushes.
cd "$(dirname "$0")/.."
echo "== flush by reads"; (cd .gpu/mm && timeout 60 ./mmb) 2>&1 | tee $OUT/mm_read.txt
echo "== flush by writes"; (cd .gpu/mm && FLUSH_WRITE=1 timeout 60 ./mmb) 2>&1 | tee $OUT/mm_write.txt
