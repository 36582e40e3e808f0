#!/bin/bash
# Second look (.gpu/tr/main2.cu): RMSNorm f32 4096 and bf16 8192 with the
# evict_last loads split by operand (Ex the row, Ew the weight, H L2 only),
# bf16 at 512 threads (p16), LayerNorm f32 8192 and softmax f32 4096 with
# and without them (E), beside torch.compile's kernels; both flushes.
cd "$(dirname "$0")/tr"
(timeout 200 ./tr2; FLUSH_WRITE=1 timeout 200 ./tr2) 2>&1 | tee $OUT/tr2.txt
