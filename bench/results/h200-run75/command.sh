#!/bin/bash
# The same variant with kf_B_ONCE = true at five shapes, one process each
# (shapes_main.cu; kernels from gen.cc as in h200-run74): partial tiles
# along M, N and K, and none.
cd "$(dirname "$0")/.."
(cd .gpu/mm && for i in 0 1 2 3 4; do ./shp $i; done) | tee $OUT/shapes.txt
