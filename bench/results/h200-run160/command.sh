#!/bin/bash
# run160: the column sums of [32768, 4096] (bf16, f32) as reduce/3 generated
# them (compiled here by nvcc) beside hand-written kernels of the same shape:
# U rows' 16-byte loads of a thread issued together before any is added
# (U = 4, 8, 16), P vectors a lane, loads plain (L0), ld.global.nc.L1::
# no_allocate (L1) or .cs (L2), split (warps a block) and slices (blocks along
# the rows); and a copy and bare reads of the same bytes. Each timed 35 times
# after an L2 flush by reads and after a 256 MB fill of zeros (median, best).
# The harness is h200-run161/cs.cu as it was before that run's edits: the
# generated sources #included and compiled by nvcc (not NVRTC cubins), the
# longer list of hand variants in main() that cs.txt shows, and inputs from a
# 32-bit LCG,
# whose poor low bits made the column sums large (max error 9.1 for every
# kernel alike: the outputs' bf16 rounding); run161 draws them by splitmix64.
#   nvcc -O3 -std=c++17 -arch=sm_90a -o cs cs.cu -lcuda && ./cs
