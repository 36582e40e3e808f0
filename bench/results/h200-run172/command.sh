#!/bin/bash
# run172: run171's harness again with the online pass's lane sums in double
# (d*, .gpu/kh-src/mkdouble.py) beside Kahan (v*, row/14 as generated) and
# plain float (p*), twice.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
for i in 1 2; do (cd .gpu/kh && timeout 100 ./kh); done 2>&1 | tee $OUT/kahan_online.txt
