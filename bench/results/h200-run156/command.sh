#!/bin/bash
# run156: run155 with register budgets that fit the launch's allocation
# (2 x creg + ng x preg <= warpgroups x launch registers); ws.cu as run,
# built as h200-run154/command.sh says with -DWS_PREG=preg -DWS_CREG=creg,
# list.txt here; h200-run153's harness; each pass under a timeout.
cd "$(dirname "$0")/m64"
for i in 1 2; do timeout 60 ./mmr 2>&1 | tee -a $OUT/mmr.txt; done
