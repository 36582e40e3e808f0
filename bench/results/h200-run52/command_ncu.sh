#!/bin/bash
# The standalone timing and ncu above (binaries built here with
#   nvcc -O3 -arch=sm_90a -std=c++17 -DGEN=\"gen.cu\" -DNAME=\"bulk\" -DSMEM=201216 -DTHREADS=512 -o b main.cu
# from h200-run54/standalone_main.cu and the golden source of the time, entry renamed kf_entry).
./b 2670; ./b 4096; ./btw 2670; ./b 2670 2
/usr/local/cuda/bin/ncu --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:kf_entry --launch-skip 2 --launch-count 1 ./b 2670
