#!/bin/bash
# The bf16 50257-wide bulk softmax as generated (C0, as in h200-run103)
# beside copies whose blocks with one row fewer than the busiest spin
# before their first row, staggered in 4 (C3: 0-9 kcycles), 2 (C4: 0 or 6)
# and 8 (C5: 0-10.5) phases; main.cu here (C3-C5 are C0 with
#   if (blockIdx.x >= kf_R % gridDim.x) { spin (blockIdx.x % P) * D cycles }
# before the row loop). Built with nvcc -O3 -arch=sm_90a -std=c++17 -o sp3 main.cu.
cd "$(dirname "$0")/.."
(cd .gpu/sp3 && timeout 60 ./sp3 2670; FLUSH_WRITE=1 timeout 60 ./sp3 2670) 2>&1 | tee $OUT/stagger.txt
