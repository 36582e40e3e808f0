#!/bin/bash
# Weight-streaming read patterns and a prototype panel GEMV (gemv_bench.cu beside this file).
# Built here: nvcc -O3 -arch=sm_90a -std=c++17 -o gemv_bench gemv_bench.cu
timeout 120 ./.gpu/gemv_bench > $OUT/gemv_bench.txt 2>&1
