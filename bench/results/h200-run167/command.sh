#!/bin/bash
# run167: the few-row products with an L2 access-policy window over the
# weights (CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: streaming on hit and
# miss, w1; normal, w2) beside the plain launch (w0), after a 256 MB memset
# and after a flush by reads: the M = 64 cluster tile (h, cp.async copies,
# the tuned variant) and the M = 16 streamed kernel (s16). If the window
# marks the copies evict-first as matmul/5's cache hint did, h after the
# memset from 47.8 to about 43.8 us. .gpu/m64: run153's gen.cc and harness
# (MROWS, the window), NVRTC cubins by nvc (sm_90a).
cd .gpu/m64
for i in 1 2; do
  MROWS=64 LIST=list64.txt timeout 100 ./mmr
  MROWS=16 LIST=list16.txt timeout 100 ./mmr
done 2>&1 | tee $OUT/window.txt
# Made here (.gpu/m64): gen.cc from bench/results/h200-run153 (linked as
# the codegen tests are); `gen 64 ""` > h.cu and `gen 16 ""` > s16.cu (the
# heuristic's variants, entries renamed kf_entry_<name>), ./nvc X.cu X.cubin
# (bench/results/sass-matmul5/nvc.cc); main.cu here, built by
#   nvcc -O3 -std=c++17 -arch=sm_90a -o mmr main.cu -lcuda
# list64.txt: h kf_entry_h 98304 64 2 256 <variant>
# list16.txt: s16 kf_entry_s16 33280 128 1 256 <variant>
