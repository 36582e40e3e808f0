#!/bin/bash
# run150: matmul/7's M = 16 kernel as NVRTC compiles it (the service's cubin)
# and as nvcc compiles the same source, each loaded through the driver,
# beside the harness's own build of it; then both cubins' SASS (496
# instructions each, alike but for two in the epilogue; not kept). The
# harness is h200-run143's main.cu, built with -DG16N_ENTRY='"kf_mm_f791e676768a"'
# -L/usr/local/cuda/lib64/stubs -lcuda; g16n_nvrtc.cubin is kfuse compile
# --cubin-dir's, g16n_nvcc.cubin nvcc -cubin -O3 -std=c++17
# -gencode=arch=compute_90a,code=sm_90a of the same source.
cd "$(dirname "$0")/.."
(cd .gpu/tma && ONLY_GEN=1 timeout 100 ./tma) 2>&1 | tee $OUT/gen.txt | grep -E 'matmul/7|streamed|strips'
od=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
for c in nvrtc nvcc; do $od -sass .gpu/tma/g16n_$c.cubin > $OUT/g16n_$c.sass 2>&1; done
for c in nvrtc nvcc; do echo "$c: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $OUT/g16n_$c.sass) instructions"; done
