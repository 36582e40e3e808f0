#!/bin/bash
# run145: the streamed M = 16 kernel beside hand edits (h200-run143's
# variants.py): its K order rotated per CTA (a warp's steps from
# blockIdx.x % 32, or % 4, on, so the CTAs do not read the same lines of x
# at once), its bias loaded before the loop, x loaded no_allocate, and
# run144's drop-one edits again; each edit checked against float64; twice.
cd "$(dirname "$0")/.."
for i in 1 2; do (cd .gpu/tma && ONLY_GEN=1 timeout 100 ./tma) 2>&1 | tee -a $OUT/gen.txt; done
