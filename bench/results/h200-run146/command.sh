#!/bin/bash
# run146: the streamed M = 16 kernel with lean loads (unpredicated, from
# per-thread base pointers, no prefetch past the last batch), with and
# without x, beside run145's edits (the harness and edits: h200-run143's
# main.cu and variants.py); twice.
cd "$(dirname "$0")/.."
for i in 1 2; do (cd .gpu/tma && ONLY_GEN=1 timeout 100 ./tma) 2>&1 | tee -a $OUT/gen.txt; done
