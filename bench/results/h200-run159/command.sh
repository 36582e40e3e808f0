#!/bin/bash
# run159: the 64 x 128 cluster tile as generated (h) beside the same kernel
# touching each B tile's 128-byte lines `ahead` steps before its cp.async
# copy (hp.cu), so that the lines enter L2 under a streaming policy before
# the copy hits them: kind 0 ld.global.cs.u32, kind 1
# ld.global.nc.L1::no_allocate.u32, kind 2 cp.async.bulk.prefetch.L2 with an
# evict_first policy. (prefetch.global.L2::evict_first does not exist: PTX
# has evict_last and evict_normal prefetches only.) hp.cu is h.cu (what
# h200-run153's mk.sh writes: `gen 64 ""`, entry renamed kf_entry_h) with
# hp.diff applied. Built with
#   nvcc -cubin -O3 -std=c++17 -arch=sm_90a -DPF_AHEAD=a -DPF_KIND=k ...
# (entry renamed per list.txt); h200-run153's harness.
cd "$(dirname "$0")/m64"
for i in 1 2; do timeout 60 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
