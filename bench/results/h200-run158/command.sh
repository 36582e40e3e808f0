#!/bin/bash
# run158: run154's warp-specialized tile with the producers' loads in other
# forms (h200-run156/ws.cu built with -DWS_LD='"ld.global.cg.v4.u32"' etc.:
# .nc.L1::no_allocate as run154, .cg, .ca, .cs, .nc with L1 allocation,
# .nc.L1::no_allocate.L2::256B), beside the tile as generated; list.txt here.
cd "$(dirname "$0")/m64"
for i in 1 2; do timeout 60 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
