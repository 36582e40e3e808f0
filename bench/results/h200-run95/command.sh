#!/bin/bash
# main6.cu includes a16_A.cu (the generated kernel, `.gpu/rows/gen` with
# KIND=rms bf16 16384 8192 resident=1,rows=1,threads=512,vec=8) and its first
# lines as a16_pre.h; nvcc -O3 -arch=sm_90 -o tr6 main6.cu -lcuda.
# bf16 RMSNorm 8192 (torch.compile leads by 4%): the tuned 512-thread
# kernel as generated (a16_A), hand-written (Z), with outputs packed by
# cvt.rn.bf16x2.f32 (B), the weight loaded before the reduction (C), the row
# held as bf16 (D), all three (E); beside torch.compile's kernel and
# cudaMemcpy (.gpu/tr/main6.cu, both flushes); then the SASS of A, E and
# torch.compile's kernel.
cd "$(dirname "$0")/tr"
(timeout 100 ./tr6; FLUSH_WRITE=1 timeout 100 ./tr6) 2>&1 | tee $OUT/tr6.txt
cuobjdump -sass -fun '_ZN5a16_A8kf_entryEPKNS_9__kf_bf16ES2_PS0_' tr6 > $OUT/sass_A.txt 2>&1
cuobjdump -sass -fun '_ZN5a16_E8kf_entryEPKNS_9__kf_bf16ES2_PS0_' tr6 > $OUT/sass_E.txt 2>&1
cuobjdump -sass t16_8192.cubin > $OUT/sass_triton.txt 2>&1
wc -l $OUT/sass_*.txt
