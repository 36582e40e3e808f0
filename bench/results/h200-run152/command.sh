#!/bin/bash
# run152: matmul/7's M = 16 kernel beside hand edits of its tail: no split-K
# sum or epilogue, the epilogue without its bias, without its GELU, or
# neither (the CTA's sum stored), as h200-run143's variants.py writes them
# from g16n.cu (matmul/7's source, see h200-run148); twice.
cd "$(dirname "$0")/.."
for i in 1 2; do (cd .gpu/tma && ONLY_GEN=1 timeout 100 ./tma) 2>&1 | tee -a $OUT/gen.txt | grep -E 'matmul/7|strips'; done
