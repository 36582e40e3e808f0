#!/bin/bash
# run143: few-row products (x [M, 8192] @ w [8192, 8192] + bias, tanh-GELU,
# bf16, M = 16 and 64) with the weights streamed by TMA into shared memory
# (main.cu: a producer lane's 2-D tensor copies, 128-byte swizzle, S stages;
# consumer warps split each stage's K, ldmatrix + mma.sync; MC > 1 shares
# x's tile over a cluster by multicast), beside bare reads of w through the
# non-coherent path and the generated streamed M = 16 kernel (g16.cu: kfuse
# compile --source of gemm_bias_gelu_m16_bf16.json, entry renamed kf_entry);
# each checked against a float64 reference, then timed after a flush by
# reads and by a 256 MB memset (median of 21); then Nsight Compute's DRAM
# bytes per launch (ncu.txt, a table made from ncu_raw.txt, which is not
# kept: each kernel's last four launches follow the memset). g16.cu, and
# its hand-edited copies for runs 144-145, are made here:
#   kfused --address=127.0.0.1:7491 --store=/tmp/g.db --no_gpu &
#   kfuse compile --server=127.0.0.1:7491 --arch sm_90a --source --cubin-dir g \
#     bench/gpu/cases/matmul/gemm_bias_gelu_m16_bf16.json
#   sed 's/kf_mm_951b43f63f66/kf_entry/g' g/kf_mm_951b43f63f66.cu > g16.cu
#   python3 variants.py
# and the program built here:
#   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DWITH_GEN \
#     -DG16_SMEM=33280 -DG16_GRID=128 -DG16_BLOCK=256 -o tma main.cu
# (main.cu here is as run152 ran it; since run150 built with -DG16N_ENTRY=... -lcuda;
# run143 ran it before the blocks after "generated M=16 (streamed)" were
# added, runs 144-150 with some of them.)
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
(cd .gpu/tma && timeout 200 ./tma) 2>&1 | tee $OUT/tma.txt
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
(cd .gpu/tma && REPS=1 timeout 240 $ncu --cache-control none --clock-control none -k regex:'tma_mm|read_strips|kf_entry' \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum ./tma) > $OUT/ncu_raw.txt 2>&1
