#!/bin/bash
# run191: a run on the GPU now stops when its job is cancelled. On the H200:
# (1) the GPU tests of kfuse_tuner_test and the Python client's tests with
#     torch against a kfused that tunes (every tuning run now waits on the
#     worker a quarter second at a time);
# (2) a full tune with a 120 s budget of the 8192^3 GEMM whose caller leaves
#     after 4 s, then a quick tune of a small chain: how long the second
#     waits for the GPU (before: until the first run ended). Not a valid
#     trial as run: a command started with & in a script ignores SIGINT, so
#     the caller never left (the long tune ran its 16.9 s and was stored);
#     run192 repeats it with SIGTERM;
# (3) every bench case tuned through kfused in quick mode, as in run190.
# Made here: build/gpu-run191 (bench/gpu/prepare.sh, the bundle less
# kfuse_cross_test, kfuse_client_test and kfuse-plan-manifest); .gpu/pysite.
b=$PWD/build/gpu-run191
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
{ timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -2 $OUT/python_tests.txt
$b/bin/kfused --address=127.0.0.1:7455 --store=/tmp/sweep.db --metrics_address=127.0.0.1:9455 \
  --worker=$b/bin/kfuse-worker > $OUT/kfused.log 2>&1 &
k=$!
c="$b/bin/kfuse --server 127.0.0.1:7455"
for i in $(seq 1 100); do $c health >/dev/null 2>&1 && break; sleep 0.3; done
{
  $c --timeout 200 tune --mode full --budget 120 bench/gpu/cases/matmul/gemm_bias_gelu_8192_bf16.json > /tmp/long.txt 2>&1 &
  t=$!; sleep 4; kill -INT $t; wait $t; echo "long tune left after 4 s"
  s=$(date +%s%N)
  $c --timeout 200 tune bench/gpu/cases/pointwise/relu_fma_f32.json > /tmp/short.txt 2>&1; rc=$?
  echo "the next tune (relu_fma_f32, quick) rc=$rc after $(( ($(date +%s%N) - s) / 1000000 )) ms"
} > $OUT/cancel.txt 2>&1
cat $OUT/cancel.txt
for f in bench/gpu/cases/{pointwise,row,reduce,matmul,attention}/*.json; do
  s=$(date +%s%N)
  timeout 120 $c --timeout 120 tune "$f" > /tmp/one.txt 2>&1; rc=$?
  printf '%-62s rc=%d %6d ms\n' "$f" $rc $(( ($(date +%s%N) - s) / 1000000 ))
done > $OUT/sweep.txt
python3 -c "
import urllib.request
for l in urllib.request.urlopen('http://127.0.0.1:9455/metrics').read().decode().splitlines():
    if l.startswith('kfuse_trials_total') or l.startswith('kfuse_build_seconds_count'): print(l)
" > $OUT/trials.txt
kill $k; wait $k
cat $OUT/trials.txt; echo "tuned: $(grep -c 'rc=0' $OUT/sweep.txt) of $(wc -l < $OUT/sweep.txt)"; grep -v "rc=0" $OUT/sweep.txt | head
grep -E "cancel" $OUT/kfused.log | head -5
