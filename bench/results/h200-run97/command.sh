#!/bin/bash
# main8.cu: a16_A32, l16_N32, l16_PK32 are a16_A.cu, l16_N.cu, l16_PK.cu with
# `long long` replaced by `int` in the kernel; nvcc -O3 -arch=sm_90 -o tr8 main8.cu -lcuda.
# 32-bit index arithmetic in the bf16 RMSNorm 8192 kernels (resident a16_A32,
# looped l16_N32 and l16_PK32), beside the 64-bit ones as generated and
# torch.compile's kernel (.gpu/tr/main8.cu, both flushes); the SASS of the
# looped kernels.
cd "$(dirname "$0")/tr"
(timeout 100 ./tr8; FLUSH_WRITE=1 timeout 100 ./tr8) 2>&1 | tee $OUT/tr8.txt
for f in l16_N l16_PK32 a16_A32; do
  cuobjdump -sass -fun "_ZN${#f}${f}8kf_entryEPKNS_9__kf_bf16ES2_PS0_" tr8 > $OUT/sass_$f.txt 2>&1
done
wc -l $OUT/sass_*
