#!/bin/bash
# run153: M = 64 (8192 x 8192 bf16 weights, bias + tanh-GELU): streamed
# variants the tuner's space never reaches at M = 64 (wide CTAs whose warps
# share x's loads through L1, split K over clusters, 32- and 64-row tiles)
# beside the heuristic's 64 x 128 cluster tile (h), after a 256 MB memset and
# after a flush by reads; twice.
# Built here (.gpu/m64):
#   gen.cc: `gen M 'param=value,...'` prints one variant's source of
#     act(x @ w + bias) and a LAUNCH line (entry, smem, grid, block); linked
#     against build/codegen/libkfuse_codegen.a, build/core/libkfuse_core.a,
#     Abseil and -lcrypto.
#   mk.sh: every variant's source, its NVRTC cubin (sass-matmul5/nvc.cc:
#     sm_90a, the service's options) and list.txt.
#   main.cu (h200-run113's harness, launch dims from list.txt):
#     nvcc -O3 -std=c++17 -arch=sm_90a -o mmr main.cu -lcuda
cd "$(dirname "$0")/m64"
for i in 1 2; do timeout 200 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
