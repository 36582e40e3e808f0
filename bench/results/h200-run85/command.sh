#!/bin/bash
# tr: nvcc -O3 -arch=sm_90a -std=c++17 -o tr main.cu -lcuda, beside the
# generated kernels (o32_O.cu, o16_O.cu; the E/F/G forms by text substitution
# of their loads with hints.h's) and torch.compile's Triton cubins for the
# same two shapes (t32_*.cubin, t16_*.cubin, from h200-run69's Triton cache;
# not kept here).
# RMSNorm f32 4096 / bf16 8192, where torch.compile leads: its Triton
# kernels (cubins from h200-run69's cache) beside kfuse's tuned resident
# kernels with four load forms and the looped one (.gpu/tr), both flushes.
cd "$(dirname "$0")/tr"
(timeout 200 ./tr; FLUSH_WRITE=1 timeout 200 ./tr) 2>&1 | tee $OUT/tr.txt
