#!/bin/bash
# Fourth look (.gpu/tr/main4.cu): bf16 RMSNorm 8192, kfuse's looped kernel
# of torch.compile's shape (512 threads, two 16-byte vectors a thread a
# pass) as generated (l16_O: L2 evict_last then evict_first, stores
# evict_first), with torch.compile's L1 and L2 forms (l16_Q), and those
# with plain stores (l16_R), beside the tuned resident kernel (o16_O) and
# torch.compile's kernel; both flushes.
cd "$(dirname "$0")/tr"
(timeout 100 ./tr4; FLUSH_WRITE=1 timeout 100 ./tr4) 2>&1 | tee $OUT/tr4.txt
