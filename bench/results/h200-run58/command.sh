#!/bin/bash
# The program (.gpu/mm/mmb) includes generated kernels: each source from
# gen.cc (h200-run58/gen.cc, linked against the build's codegen library:
# `gen M 'param=value,...'` prints the kernel of act(x @ w + bias) for x
# [M, 8192], w [8192, 8192]), entry renamed kf_entry, extern "C" dropped.
# main.cu (h200-run60/main.cu is the last version; this run's listed the
# kernels its output names) was built here with
#   nvcc -O3 -arch=sm_90a -std=c++17 -o mmb main.cu
# The L2 left dirty by the benchmark's flush (a 256 MB memset, as do_bench's
# cache.zero_()) against a flush by reads, and loads of the weights with an
# L2 evict-first policy, side by side (.gpu/mm/main.cu).
cd "$(dirname "$0")/.."
echo "== flush by reads"; (cd .gpu/mm && timeout 60 ./mmb) 2>&1 | tee $OUT/mm_read.txt
echo "== flush by writes"; (cd .gpu/mm && FLUSH_WRITE=1 timeout 60 ./mmb) 2>&1 | tee $OUT/mm_write.txt
