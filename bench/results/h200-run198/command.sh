#!/bin/bash
# run198: bench/gpu/tune_sweep.sh on the H200, the sweep runs 190-197 wrote
# out each time, now one script, with run197's bundle (the code of 4ce8a25;
# since then only docs and this script changed): every bench case tuned
# through kfused in quick mode, the trial outcomes it counted.
mkdir -p /tmp/k && xz -dc build/gpu-run197.tar.xz | tar -C /tmp/k -xf - || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
bash bench/gpu/tune_sweep.sh /tmp/k/gpu-run197 "$OUT"
tail -5 "$OUT/sweep.txt"
