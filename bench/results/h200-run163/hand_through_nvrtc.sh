#!/bin/bash
# The hand-batched bf16 kernel of run160 (cs<unsigned short, 1, 8, 0, 8> in
# ../h200-run161/cs.cu) cut out for NVRTC as hand.cu, then compiled by nvc
# (../sass-matmul5/nvc.cc) to hand.cubin; entries.txt names its mangled entry.
set -e
python3 - "$(dirname "$0")/../h200-run161/cs.cu" <<'PY'
import sys
src = open(sys.argv[1]).read()
body = src[src.index('__device__ __forceinline__ uint4 ld_plain'):src.index('template <int L>\n__global__ void bare')]
inst = ('template __global__ void cs<unsigned short, 1, 8, 0, 8>'
        '(const unsigned short*, unsigned short*, float*, unsigned*);\n')
open('hand.cu', 'w').write('constexpr long long R = 32768, N = 4096;\n' + body + inst)
PY
LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./nvc hand.cu hand.cubin
