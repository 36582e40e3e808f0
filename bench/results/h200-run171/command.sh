#!/bin/bash
# run171: row/14 (the online pass's f32 lane sums Kahan-compensated).
# (1) main.cu: the f32 softmax 50257 space's looped and staged variants as
# row/14 generates them (v*) beside their plain twins (p*: row/13's online
# pass, a hand edit by mkplain.py) and the tuned bulk variant (v9), 4096
# rows, errors on sampled rows against fp64 for x uniform in [-4, 4]
# ("spread") and the same times 2^-21 ("flat", near-uniform rows), in units
# of 2^-24 of the row's largest output; times after a 256 MB memset (median
# of 40) beside cudaMemcpy. (2) GpuRowTest with the near-uniform softmax
# (row_test::NearUniformSoftmax) at W = 1001 and 50257.
# Sources made here:
#   (cd build && c++ -O1 -std=c++17 -I.. -I. ../.gpu/rc/gen2.cc -o ../.gpu/kh/gen2 <codegen libs>)
#   KIND=softmax ./gen2 f32 50257 4096 4096 2670 > list_all.txt; python3 mkplain.py
#   for f in v*.cu p*.cu; do ./nvc $f ${f%.cu}.cubin; done   # NVRTC, sm_90a
#   nvcc -O2 -arch=sm_90a -std=c++17 -o kh main.cu -lcuda
#   bash bench/gpu/prepare.sh build
# On the H200:
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
(cd .gpu/kh && timeout 150 ./kh) 2>&1 | tee $OUT/kahan_online.txt
timeout 420 $b/bin/kfuse_cross_test --gtest_filter="GpuRow*" > $OUT/gpu_row.log 2>&1
