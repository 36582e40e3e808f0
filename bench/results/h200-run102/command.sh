#!/bin/bash
# The 50257-wide softmax trial program (h200-run106/softmax_wide_bench.cu:
# the clt and clx kernels there are the ones that ran here, unchanged; the
# file later gained the bst and dyn variants, the --ends flag and a counter
# pointer in Geo), built here with
#   nvcc -O3 -arch=sm_90a -std=c++17 -o .gpu/softmax_wide/softmax_wide_bench softmax_wide_bench.cu
# run100 ran the same program's clt variants (its softmax_wide.txt).
cd "$(dirname "$0")/.."
timeout 120 ./.gpu/softmax_wide/softmax_wide_bench \
  --only diag_rowcopy_tma,tma_dbuf,dbuf3,diag_clu,clt,diag_clt,clx,diag_clx > $OUT/softmax_wide.txt 2>&1
# CTA 0's clock64 timeline of each row (streams: before the buffer's wait,
# after it, after the exchange, after the output pass):
(cd .gpu/softmax_wide && timeout 60 ./softmax_wide_bench --dtype bf16 --only clx,diag_clx,tma_dbuf --trace) > $OUT/trace.txt 2>&1
