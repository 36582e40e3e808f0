#!/bin/bash
# l16_N.cu is the generated looped kernel (KIND=rms bf16 16384 8192
# resident=0,rows=1,threads=512,vec=8); l16_P / L / LK / PK are it with the
# loads and sums rewritten (l16_forms.h); nvcc -O3 -arch=sm_90 -o tr7 main7.cu -lcuda.
# bf16 RMSNorm 8192 in the looped 512-thread schedule (row/8 unrolls its
# passes), in the load forms torch.compile's kernel uses: N as generated (L2
# evict_last / evict_first policies on loads and stores), P plain loads and
# stores, L L1::evict_last then L1::evict_first loads and plain stores; LK,
# PK with plain sums for the Kahan ones. Beside the tuned resident kernel
# (a16_A), torch.compile's and cudaMemcpy (.gpu/tr/main7.cu, both flushes).
cd "$(dirname "$0")/tr"
(timeout 100 ./tr7; FLUSH_WRITE=1 timeout 100 ./tr7) 2>&1 | tee $OUT/tr7.txt
