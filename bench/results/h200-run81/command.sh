#!/bin/bash
# rb3: nvcc -O3 -arch=sm_90a -std=c++17 -o rb3 main3.cu, with main3.cu and
# f32_3p.cu from h200-run62 and row/5's generated bf16/f32 kernels beside them.
# The 50257-wide softmax's bulk kernels (row/5, bf16 and f32; the run62
# one-expf trial) and cudaMemcpy at row counts that are and are not whole
# waves of 132 persistent blocks: how much the last partial wave costs.
cd "$(dirname "$0")/rows"
for r in 2640 2670 2772 5280; do timeout 100 ./rb3 $r; done 2>&1 | grep -v differing | tee $OUT/waves.txt
