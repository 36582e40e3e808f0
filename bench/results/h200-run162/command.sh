#!/bin/bash
# run162: reduce/4's column sums under other batch sizes and launch bounds
# (which set the register cap and so how many loads ptxas keeps in flight),
# beside reduce/3, run160's hand-batched kernels and a copy of the same bytes.
# .gpu/cs holds run161's cs.cu (bench/results/h200-run161), this run's
# entries.txt and the cubins it names: gen_* as in run161, v_* made by
# variants.sh from reduce4_column_sum_*.cu.
( cd .gpu/cs && timeout 170 ./cs > $OUT/cs.txt 2>&1; echo "cs rc=$?" )
cat $OUT/cs.txt
