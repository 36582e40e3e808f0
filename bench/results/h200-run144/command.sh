#!/bin/bash
# run144: where the streamed M = 16 kernel's 4 us over a bare read go: the
# generated kernel beside hand edits that drop one thing each (x's loads,
# the products, the split-K sum and epilogue, all three); the harness and
# the edits are h200-run143's (main.cu, variants.py), run twice.
cd "$(dirname "$0")/.."
for i in 1 2; do (cd .gpu/tma && ONLY_GEN=1 timeout 100 ./tma) 2>&1 | tee -a $OUT/gen.txt; done
