#!/bin/bash
# row/6 trial: the 50257-wide softmax with rows split over a cluster of 2
# or 4 bulk-staged blocks (.gpu/sp: B1-B5 bf16, F1-F4 f32) beside row/5's
# whole-row kernels (B0, F0) and cudaMemcpy, after both flushes, at 2670
# rows (the suite's) and 2640 (whole waves of 132).
cd "$(dirname "$0")/sp"
(timeout 120 ./sp 2670; FLUSH_WRITE=1 timeout 120 ./sp 2670; timeout 120 ./sp 2640) 2>&1 | tee $OUT/split.txt
