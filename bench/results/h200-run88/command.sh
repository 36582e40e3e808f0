#!/bin/bash
# o16_T1.cu: the bf16 kernel as T1 (from h200-run85/o16_O.cu with the row
# and weight loads in hints.h's E form, and the outputs' pass reloading the
# row in its I form); T2 is E with an applypriority evict_normal of each of
# the row's 128-byte lines after the reduction (one lane in eight).
# Third look (.gpu/tr/main3.cu): RMSNorm f32 4096 and bf16 8192 with the row
# loaded evict_last, then re-read evict_first in the outputs' pass as
# torch.compile does (T1), or its lines demoted to evict_normal once
# reduced (T2), beside H (evict_last alone) and torch.compile; both flushes.
cd "$(dirname "$0")/tr"
(timeout 200 ./tr3; FLUSH_WRITE=1 timeout 200 ./tr3) 2>&1 | tee $OUT/tr3.txt
