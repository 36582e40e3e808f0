#!/bin/bash
# No GPU: matmul/5's faulting edge tile (run80's e7.cu) with its L2 policy from
# other sources, compiled by NVRTC 13.0 with the service's options (nvc.cc) and
# each cubin's SASS read by run80's desc_registers.py (copies whose descriptor
# registers nothing writes; in run80 exactly the kernels that faulted had them).
set -e
here=$(cd "$(dirname "$0")" && pwd); tmp=$(mktemp -d); cd $tmp
g++ -O1 -I/usr/local/cuda/include $here/nvc.cc -L/usr/local/cuda/lib64 -lnvrtc -o nvc
python3 $here/variants.py $here/../h200-run80/e7.cu
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
for k in eA eB eC eD eE; do
  LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./nvc $k.cu $k.cubin 2>/dev/null
  $cuobjdump -sass $k.cubin > $k.sass
  echo "$k: $(python3 $here/../h200-run80/desc_registers.py $k.sass | tr '\n' ' ')"
done > $here/desc_registers.txt
cat $here/desc_registers.txt
