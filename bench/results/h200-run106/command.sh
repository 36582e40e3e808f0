#!/bin/bash
# Rows handed out by an atomic counter (dyn, diag_dyn) beside static
# assignment (tma_dbuf, diag_rowcopy_tma), with every block's start and
# finish time (--ends). softmax_wide_bench.cu here, built with
#   nvcc -O3 -arch=sm_90a -std=c++17 -o .gpu/softmax_wide/softmax_wide_bench softmax_wide_bench.cu
cd "$(dirname "$0")/.."
timeout 120 ./.gpu/softmax_wide/softmax_wide_bench --ends \
  --only diag_rowcopy_tma,tma_dbuf,dyn,diag_dyn > $OUT/softmax_wide.txt 2>&1
