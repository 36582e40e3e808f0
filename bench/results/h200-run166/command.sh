#!/bin/bash
# run166: row loads through L1::no_allocate forms, to see whether a row
# kernel's fixed cost after the 256 MB memset (the tuner's and do_bench's
# flush) is the memset's dirty lines evicted by its loads. The tuned bf16
# softmax 4096 (resident=1, rows=4, 32 threads a row: smP as generated,
# smN ld.global.nc.L1::no_allocate, smC ld.global.L1::no_allocate), a
# resident RMSNorm bf16 4096 (r0P, r0N) and the tuned looped one (rlP; rlN
# and rlM with L1::no_allocate, coherent and .nc, on its L2-hinted loads),
# and a grid-stride copy kernel (cpP __ldg, cpN no_allocate) beside
# cudaMemcpy, each at 32768 and 20480 rows, after the memset (twice) and
# after a flush by reads. .gpu/rc: run114's harness with FLUSH=reads,
# edits.py makes the edited sources, nvc.cc the NVRTC cubins (sm_90a).
cd .gpu/rc
for fl in memset reads memset; do
  echo "== flush by $fl"
  FLUSH=$fl SOFTMAX=1 LIST=list_sm.txt timeout 60 ./rc 32768 20480
  FLUSH=$fl LIST=list_rms.txt timeout 60 ./rc 32768 20480 | grep -v "^copy"
  FLUSH=$fl LIST=list_cp.txt timeout 60 ./rc 32768 20480 | grep -v "^copy"
done 2>&1 | tee $OUT/rc_noalloc.txt
# Made here (.gpu/rc):
#   gen2 from bench/results/h200-run114/gen2.cc (linked as codegen tests
#   are); KIND=softmax gen2 bf16 4096 32768 32768 20480 (v26 is smP) and
#   KIND=rms (v0 is r0P, v22 rlP); python3 edits.py; cpP.cu is cpN.cu with
#   the asm load replaced by __ldg; ./nvc X.cu X.cubin for each
#   (bench/results/sass-matmul5/nvc.cc); main.cu: run114's harness with a
#   flush by reads (FLUSH=reads), built by
#   nvcc -O2 -arch=sm_90a -std=c++17 -o rc main.cu -lcuda
