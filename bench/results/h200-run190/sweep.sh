#!/bin/bash
# run190 (second call): every bench case (pointwise, row, reduce, matmul,
# attention) tuned through kfused on the H200 with `kfuse tune` (quick mode),
# so every real candidate is judged again after its timed runs; then the
# trial outcomes kfused counted (kfuse_trials_total) and each case's state.
b=$PWD/build/gpu-run190
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
$b/bin/kfused --address=127.0.0.1:7455 --store=/tmp/sweep.db --metrics_address=127.0.0.1:9455 \
  --worker=$b/bin/kfuse-worker > $OUT/kfused.log 2>&1 &
k=$!
for i in $(seq 1 100); do $b/bin/kfuse --server 127.0.0.1:7455 health >/dev/null 2>&1 && break; sleep 0.3; done
for f in bench/gpu/cases/{pointwise,row,reduce,matmul,attention}/*.json; do
  s=$(date +%s%N)
  timeout 120 $b/bin/kfuse --server 127.0.0.1:7455 --timeout 120 tune "$f" > /tmp/one.txt 2>&1; rc=$?
  printf '%-62s rc=%d %6d ms  %s\n' "$f" $rc $(( ($(date +%s%N) - s) / 1000000 )) "$(tail -1 /tmp/one.txt | head -c 150)"
done > $OUT/sweep.txt
python3 -c "
import urllib.request
for l in urllib.request.urlopen('http://127.0.0.1:9455/metrics').read().decode().splitlines():
    if l.startswith('kfuse_trials_total') or l.startswith('kfuse_build_seconds_count'): print(l)
" > $OUT/trials.txt
kill $k; wait $k
cat $OUT/trials.txt; grep -c "rc=0" $OUT/sweep.txt; grep -v "rc=0" $OUT/sweep.txt | head -20
grep -hE "after timing|wrong_result|failed on the GPU" $OUT/kfused.log | head -10
