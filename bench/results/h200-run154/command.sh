#!/bin/bash
# run154: M = 64 (8192 x 8192 bf16 weights, bias + tanh-GELU): a
# warp-specialized trial of the heuristic's 64 x 128 cluster tile beside the
# tile as generated (h), after a 256 MB memset and after a flush by reads;
# twice. The trial (h200-run156/ws.cu, in its first form: no setmaxnreg, the
# producers going on to the kernel's end with the tile warps): ng groups of
# gw producer warps load the A and B tiles by ld.global.nc into registers and
# store them swizzled, `batch` stages at a time, behind full/empty mbarriers;
# the 8 tile warps as generated. Built here (.gpu/m64):
#   nvcc -cubin -O3 -std=c++17 -arch=sm_90a -DWS_NG=ng -DWS_GW=gw \
#     -DWS_BATCH=batch -DWS_S=stages -DWS_NAME=kf_entry_wX -o wX.cubin ws.cu
# with h200-run153's harness (mmr) and list.txt here.
cd "$(dirname "$0")/m64"
for i in 1 2; do timeout 200 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
