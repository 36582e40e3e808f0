#!/bin/bash
# run201: are the few-row kernels bound per SM, and would 132 CTAs pay?
# The streamed M = 16 kernel (matmul/7) runs 128 CTAs, one 64-column strip
# each, so 4 of the 132 SMs idle. sk.cu (built here: nvcc -O3 -std=c++17
# -arch=sm_90a -o .gpu/sk/sk .gpu/sk/sk.cu, with g16.cu = kfuse compile
# --source of gemm_bias_gelu_m16_bf16.json at 5061fd7) times, after a flush
# by reads and after a 256 MB memset, median of 40, twice: the generated
# kernel; the same schedule rewritten with two accumulator sets over 128
# strips / 128 CTAs, over 132 strips / 132 CTAs (N = 8448: same work a CTA),
# and stream-K (128 strips over 132 CTAs, each 1/132 of the (strip, step)
# space; a cut strip's partials summed in CTA order through a workspace by
# the last to arrive, a ticket a strip); and each one's loads alone.
# Every math kernel is checked against fp64 on 256 columns x 16 rows.
timeout 200 .gpu/sk/sk 2>&1 | tee $OUT/sk.txt
