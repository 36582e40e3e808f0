#!/bin/bash
# run180: M = 64 (8192 x 8192 bf16 weights, bias + tanh-GELU), after run179
# found why the weights' register ring in xs.cu collapses: ptxas puts every
# ld.global.nc of the weights on one scoreboard (SB5), and the first use of
# any of them waits for all in flight. pp_*: two register buffers of two k16
# half-steps, each permuted into mma operands (its wait) before the other's
# loads issue, the order pinned by an opaque zero (a pointer's top bit) ANDed
# with every operand into the next loads' address (d1; d0 without); pp_nomma:
# the same stream without the products (outputs wrong by design). Beside h and
# s64w1k8 as in run179, after a 256 MB memset and after reads, twice.
# Built here (.gpu/m64) as run179's; SASS checked with cuobjdump before the run.
( cd .gpu/m64 && for i in 1 2; do timeout 120 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done )
