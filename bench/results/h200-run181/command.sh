#!/bin/bash
# run181: M = 64 as run180, after run180's pp_nomma (the weights' stream
# alone, 45.4 us after reads) put the limit on the bytes in flight, not the
# products. ip_bB_n0: the ping-pong with each buffer permuted where it lies
# (two buffers of B k16 half-steps, no operand copy), B = 2, 3 (spills 32
# bytes) and 4 (spills 456); ip_bB_n1: the same stream without the products,
# B = 3 and 4 (outputs wrong by design). Beside h and run180's pp_b2_x4_d1
# and pp_nomma, after a 256 MB memset and after reads, twice. xs.cu here.
( cd .gpu/m64 && for i in 1 2; do timeout 120 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done )
