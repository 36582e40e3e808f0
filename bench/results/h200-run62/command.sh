#!/bin/bash
# f32_3p.cu: the hand edit (row/5's generated f32 kernel, entry renamed
# kf_entry, extern "C" dropped, its stats and output passes rewritten);
# main3.cu: h200-run61/main.cu with it in place of the split-refill kernel
# (its "row/5 vs row/6" line then counts elements that differ by the sum's
# order). Built here: nvcc -O3 -arch=sm_90a -std=c++17 -o rb3 main3.cu
# Trial: the f32 50257-wide softmax with one expf an element (max; exp(x -
# max) written back over the staged row, and its sum; outputs scale the
# stored exps), a hand edit of row/5's kernel (.gpu/rows/f32_3p.cu), beside
# row/5's and cudaMemcpy, after both flushes.
cd "$(dirname "$0")/.."
(cd .gpu/rows && timeout 100 ./rb3 2670; FLUSH_WRITE=1 timeout 100 ./rb3 2670) 2>&1 | tee $OUT/rows.txt
