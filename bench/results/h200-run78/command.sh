#!/bin/bash
# SASS of the faulting matmul/5 kernel (e1) and its unflagged twin (e0):
# the weight copies (LDGSTS) and the policy's creation.
# .gpu/mm/edges is h200-run74's program. ldgsts.txt: the copies of both
# kernels (grep of the dump).
cd "$(dirname "$0")/.."
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump | head -1)
$cuobjdump -sass .gpu/mm/edges > $OUT/edges.sass 2>&1
grep -n "Function\|LDGSTS\|POLICY\|UR[0-9]*.*POL\|CCTL\|ERRBAR" $OUT/edges.sass | head -80
