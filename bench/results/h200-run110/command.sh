#!/bin/bash
# The 50257-wide softmax's bulk kernels as generated (row/11, dyn=1; B0/B0h bf16
# at 1024/512 threads, F0/F0h f32) beside hand edits, each timed after an L2
# flush (by reads, then by a 256 MB memset: FLUSH_WRITE=1), 20 timed of 23,
# errors on 12 sampled rows against fp64, and kf_ex2_poly (poly.h) against
# exp2 in fp64. Sources (made here, .gpu/px):
# (gen: a build of the generator older than the committed row/11: its row
# taking kept 64-bit slots and a kf_more flag, 48 registers a thread in B0
# where the committed kernel takes 32; B0.cu and F0.cu here are what ran)
#   KIND=softmax gen bf16 -2670 50257 'dyn=1,grid=132,resident=3,rows=1,stages=2,threads=1024,vec=8,policy=0' > B0.cu
#   (B0h: threads=512; F0/F0h: f32, stages=1, vec=4; only B0.cu and F0.cu are kept
#   here, the others are the same command), each kernel renamed kf_entry;
#   python3 edit.py B0.cu B1.cu 'e == 0'; edit.py B0.cu B2.cu 'e % 4 == 0';
#   edit.py B0.cu B3.cu 'e % 8 == 7'; edit.py B0h.cu B1h.cu 'e == 0'; edit.py B0h.cu B2h.cu 'e % 4 == 0'
#   python3 edit_f.py F0.cu F1.cu inv; F3: inv,fast; F5: chunk; F6: inv,fast,chunk (F0h -> F5h, F6h)
# main_nvcc.cu (the run111 list; run110's in its comment) includes every source
# in its own namespace:
#   nvcc -O3 -arch=sm_90a -std=c++17 -o px main_nvcc.cu
cd "$(dirname "$0")/.."
cd .gpu/px && ./px > $OUT/px_reads.txt 2>&1; FLUSH_WRITE=1 ./px > $OUT/px_memset.txt 2>&1
