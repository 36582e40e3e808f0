#!/bin/bash
# run157: what holds run154's warp-specialized tile (h200-run156/ws.cu):
# the same producers copying by cp.async (-DWS_CPASYNC: a stage's copies,
# then cp.async.wait_group 0, then its full barrier), or loading by
# ld.global.nc without storing (-DWS_NOSTORE: the tile warps multiply
# whatever the buffers hold, so the outputs are wrong: timing only), beside
# the tile as generated and run154's we6. Built as h200-run154/command.sh
# says; list.txt here.
cd "$(dirname "$0")/m64"
for i in 1 2; do timeout 60 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
