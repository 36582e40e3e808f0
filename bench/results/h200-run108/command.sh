#!/bin/bash
# The few-row streamed products (M = 1 and M = 16 against 8192 x 8192 bf16
# weights, one 64-column strip a CTA, 128 CTAs) and the bare strip reads:
# each CTA's start and end by %globaltimer. main.cu here; s1.cu and s16.cu
# are the generated kernels of h200-run64 (the stream heuristic's M = 1 and
# M = 16 variants, entry renamed kf_entry) with two lines added: thread 0
# stamps g_ends[3 * blockIdx.x] (start) and, after a barrier at the end,
# g_ends[3 * blockIdx.x + 1]. Built with nvcc -O3 -arch=sm_90a -std=c++17.
cd "$(dirname "$0")/.."
(cd .gpu/mmends && echo "== flush by reads" && timeout 60 ./mmends && echo "== flush by a memset" && FLUSH_WRITE=1 timeout 60 ./mmends) 2>&1 | tee $OUT/ends.txt
