#!/bin/bash
# run147: the streamed M = 16 kernel with 16 warps along K (512 threads, at
# most 128 registers), as generated and with lean loads, and with lean
# loads over 4 warps, beside run146's edits (h200-run143's main.cu and
# variants.py; the 16- and 4-warp copies launched with 512 and 128 threads
# and 16 x 16 x 65 or 4 x 16 x 65 floats of shared memory); twice.
cd "$(dirname "$0")/.."
for i in 1 2; do (cd .gpu/tma && ONLY_GEN=1 timeout 100 ./tma) 2>&1 | tee -a $OUT/gen.txt; done
