#!/bin/bash
# Whole rows staged by bulk copies with the outputs written back into the
# stage and stored by bulk copies from a producer warp (bst), beside the
# per-thread stores' schedule (tma_dbuf, dbuf3) and the copies (diag_*).
# The program is h200-run106/softmax_wide_bench.cu (a superset of the one
# that ran here), built with
#   nvcc -O3 -arch=sm_90a -std=c++17 -o .gpu/softmax_wide/softmax_wide_bench softmax_wide_bench.cu
cd "$(dirname "$0")/.."
timeout 120 ./.gpu/softmax_wide/softmax_wide_bench \
  --only diag_rowcopy_tma,tma_dbuf,dbuf3,bst,diag_bst > $OUT/softmax_wide.txt 2>&1
(cd .gpu/softmax_wide && timeout 60 ./softmax_wide_bench --dtype bf16 --only bst,diag_bst --trace) > $OUT/trace.txt 2>&1
