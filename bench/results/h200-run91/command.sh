#!/bin/bash
# Looped passes of a static width unrolled whole (the generator of branch
# wip/looped-unroll, kernels made with .gpu/rows/gen built against it):
# RMSNorm bf16 8192 and f32 4096 in the looped 512-thread schedule, before
# (l16_O, l32_O) and after (u16, u32), beside the tuned resident kernels
# and torch.compile's (.gpu/tr/main5.cu); both flushes.
cd "$(dirname "$0")/tr"
(timeout 100 ./tr5; FLUSH_WRITE=1 timeout 100 ./tr5) 2>&1 | tee $OUT/tr5.txt
