#!/bin/bash
# run155: run154's trial with setmaxnreg (producer warpgroups down to preg
# registers, the tile warps up to creg; producers return after their loads
# and the cluster barriers: h200-run156/ws.cu) and 2-4 producer groups.
# Hung at its first 3-group kernel (wj: 640 threads launched at 96 registers,
# 2 x 160 + 3 x 64 > 5 x 96, so the tile warps' setmaxnreg.inc waited for
# registers the launch never held); each pass killed by its timeout after h
# and we6. Rerun with budgets that fit as run156.
cd "$(dirname "$0")/m64"
for i in 1 2; do timeout 200 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
