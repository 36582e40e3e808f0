#!/bin/bash
# run197: HEAD after two reviews' fixes (a failed worker restart is
# Unavailable and backs off; heuristic answers neither published to nor taken
# from the fleet by a node that tunes; class indices of one class, or that
# are divisors too, kept in range). On the H200, in parallel: (1) the GPU
# tests of kfuse_tuner_test and kfuse_cuda_test, then the Python client's
# tests with torch against a kfused that tunes; (2) every bench case tuned
# through kfused (quick mode), with the trial outcomes kfused counted.
# Made here: build/gpu-run197.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse_cross_test, kfuse_client_test and kfuse-plan-manifest, packed with
# xz); .gpu/pysite.
mkdir -p /tmp/k && xz -dc build/gpu-run197.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run197
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
sweep() {
  $b/bin/kfused --address=127.0.0.1:7455 --store=/tmp/sweep.db --metrics_address=127.0.0.1:9455 \
    --worker=$b/bin/kfuse-worker > $OUT/kfused.log 2>&1 &
  local k=$!
  for i in $(seq 1 100); do $b/bin/kfuse --server 127.0.0.1:7455 health >/dev/null 2>&1 && break; sleep 0.3; done
  for f in bench/gpu/cases/{pointwise,row,reduce,matmul,attention}/*.json; do
    s=$(date +%s%N)
    timeout 60 $b/bin/kfuse --server 127.0.0.1:7455 --timeout 60 tune "$f" > /tmp/one.txt 2>&1; rc=$?
    printf '%-62s rc=%d %6d ms  %s\n' "$f" $rc $(( ($(date +%s%N) - s) / 1000000 )) "$(tail -1 /tmp/one.txt | head -c 150)"
  done
  python3 -c "
import urllib.request
for l in urllib.request.urlopen('http://127.0.0.1:9455/metrics').read().decode().splitlines():
    if l.startswith('kfuse_trials_total') or l.startswith('kfuse_build_seconds_count'): print(l)
"
  kill $k; wait $k
  echo "cases ok: $(grep -c ' rc=0 ' $OUT/sweep.txt)"
  grep -hE "off by more|wrong_result|failed on the GPU" $OUT/kfused.log | head -20
}
sweep > $OUT/sweep.txt 2>&1 & p1=$!
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)|FarCount|RandomInputsMatch" $OUT/service_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -2 $OUT/python_tests.txt
wait $p1
tail -6 $OUT/sweep.txt; grep -E "cross_entropy|nll" $OUT/sweep.txt
