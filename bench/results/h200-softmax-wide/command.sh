#!/bin/bash
# Wide-row (50257) softmax schedules side by side with the copy, a
# standalone program (softmax_wide_bench.cu beside this file).
# Built here: nvcc -O3 -arch=sm_90a -std=c++17 -o softmax_wide_bench softmax_wide_bench.cu
timeout 100 ./.gpu/softmax_wide/softmax_wide_bench > $OUT/results_h200_final.txt 2>&1
