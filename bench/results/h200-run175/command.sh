#!/bin/bash
# run175: the few-row products' weight loads with an L2 prefetch-size
# qualifier (.L2::128B / .L2::256B) beside the kernels as generated, after a
# 256 MB memset and after a flush by reads: the M = 16 streamed kernel
# (ld.global.nc.L1::no_allocate), the M = 64 cluster tile (cp.async.cg), and
# bare strip reads of the same weights (128 CTAs, a 128-byte strip each,
# 16 loads in flight a thread). .gpu/m64: run167's harness (WMAX=1: plain
# launches only), NVRTC cubins by nvc (sm_90a).
cd .gpu/m64
for i in 1 2; do
  WMAX=1 MROWS=16 LIST=list16p.txt timeout 100 ./mmr
  WMAX=1 MROWS=64 LIST=list64p.txt timeout 100 ./mmr
done 2>&1 | tee $OUT/prefetch.txt
for f in s16 s16p2 h hp2 br0 br2; do
  echo "$f: $(cuobjdump -sass $f.cubin 2>&1 | grep -oE '(LDG|LDGSTS)[A-Z0-9._]*' | sort | uniq -c | tr '\n' ' ')"
done 2>&1 | tee $OUT/sass_loads.txt
# The row-count criterion's kernels with their row loads marked .L2::256B
# (smQ: the tuned bf16 softmax 4096; r0Q: a resident RMSNorm bf16 4096)
# beside them as generated, at 32768 and 20480 rows (.gpu/rc, run166's
# harness; edits by edits.py's plain_load).
cd ../rc
for fl in memset reads memset; do
  echo "== flush by $fl"
  FLUSH=$fl SOFTMAX=1 LIST=list_smq.txt timeout 60 ./rc 32768 20480
  FLUSH=$fl LIST=list_rmsq.txt timeout 60 ./rc 32768 20480 | grep -v "^copy"
done 2>&1 | tee $OUT/rc_prefetch.txt
# Made here: s16p1/s16p2 and hp1/hp2 are .gpu/m64's s16.cu and h.cu (run153's
# gen.cc, the heuristic's variants) with `.L2::128B` / `.L2::256B` added to
# the weights' ld.global.nc.L1::no_allocate (s16) or cp.async.cg (h) by sed;
# br0/br1/br2 are bare_reads.cu without the qualifier / with .L2::128B /
# .L2::256B; smQ and r0Q are .gpu/rc's smP.cu and r0P.cu with their row loads
# as `ld.global.nc.L2::256B` (edits.py's plain_load). main.cu gained WMAX
# (how many of run167's window modes to time; 1 = plain launches).
