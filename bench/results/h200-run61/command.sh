#!/bin/bash
# Not kept in the generator: no gain. f32_new.cu is the trial's generated
# f32 kernel (the refill's head issued mid-pass, the tail after it); the
# others are the row/5 kernels (tests/golden/row_softmax_bf16_50257_peeled.cu
# is the bf16 one) and the trial's bf16 twin, each with its entry renamed
# kf_entry and extern "C" dropped. Built here:
#   nvcc -O3 -arch=sm_90a -std=c++17 -o rb main.cu
# row/6: the bulk-staged 50257-wide softmax with its buffer's refill split
# in two (the head once the last pass is past half the row), beside row/5's
# kernels and cudaMemcpy, bf16 and f32, after a flush by reads and by a
# 256 MB memset (.gpu/rows/main.cu, generated source).
cd "$(dirname "$0")/.."
(cd .gpu/rows && timeout 100 ./rb 2670; FLUSH_WRITE=1 timeout 100 ./rb 2670) 2>&1 | tee $OUT/rows.txt
