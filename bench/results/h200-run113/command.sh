# run113: matmul M = 64 (8192 x 8192 weights, bias + tanh-GELU), the
# generated kernels compiled by NVRTC (sm_90a, the service's options) side by
# side: the heuristic's 64 x 128 cluster tile (h) and the same tile with B's
# tiles through registers (breg = 1: ld.global.nc stages - 1 tiles ahead,
# st.shared at the end of the step before their own; generator.diff, not
# kept). Outputs against fp64 on 6 rows and bit for bit against h's.
# Built here:
#   .gpu/mm/gen 64 "breg=1[,stages=S][,bk=128]" > NAME.cu; nvc NAME.cu NAME.cubin
#   nvcc -O2 -arch=sm_90a -std=c++17 -o mmr main.cu -lcuda
# On the H200: cd .gpu/mmr && ./mmr | tee $OUT/mmr.txt
# b4_loop.sass: b4's main loop (cuobjdump -sass), the LDGs at a step's start,
# the STS of the next step's tile at its end.
