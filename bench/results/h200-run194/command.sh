#!/bin/bash
# run194: after the check gained a bound on each element of a bf16 or f16
# output (at most slack x eager's count of elements further than eps of
# their own reference, plus n / 1024): everything that judges kernels on the
# GPU, so no right kernel is now refused. In parallel on the H200:
# (1) GpuRowTest, (2) GpuReduceTest and GpuAttentionTest, (3) the chains,
# layouts and reduce-chains suites, GpuMatmulTest, then every bench case
# tuned through kfused (`kfuse tune`, quick mode) with the trial outcomes
# kfused counted; (4) kfuse_cuda_test, the GPU tests of kfuse_tuner_test
# (WorkerKernelsGpuTest.CompareMatchesTheHost: the new count on the GPU and
# the host), kfuse_client_test, and the Python client's tests with torch.
# Made here: build/gpu-run194.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse-plan-manifest, packed with xz to fit the carry); .gpu/pysite.
mkdir -p /tmp/k && xz -dc build/gpu-run194.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run194
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PATH=$b/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
x=$b/bin/kfuse_cross_test
timeout 560 $x --gtest_filter='GpuRowTest.*' > $OUT/row.txt 2>&1 & p1=$!
( timeout 300 $x --gtest_filter='GpuReduceTest.*'
  timeout 250 $x --gtest_filter='GpuAttentionTest.*' ) > $OUT/reduce_attention.txt 2>&1 & p2=$!
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
  grep -hE "far from|off by more|wrong_result|failed on the GPU" $OUT/kfused.log | head -20
}
{ ( timeout 150 $x --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*:GpuReduceChainsTest.*'
    timeout 250 $x --gtest_filter='GpuMatmulTest.*' ) > $OUT/chains_matmul.txt 2>&1
  sweep > $OUT/sweep.txt 2>&1; } & p3=$!
{ $b/bin/kfuse_cuda_test; echo "cuda_test rc=$?"
  timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"
  $b/bin/kfuse_client_test --gtest_filter='ClientTest.*'; echo "client_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
KFUSED=$b/bin/kfused KFUSE_CLI=$b/bin/kfuse PYTHONPATH=$PWD/.gpu/pysite timeout 300 python3 -m pytest -q -p no:cacheprovider -rs \
  clients/python/tests > $OUT/python_tests.txt 2>&1; echo "python tests rc=$?"; tail -4 $OUT/python_tests.txt
wait $p1 $p2 $p3
for f in row reduce_attention chains_matmul; do echo "$f: $(grep -E '^\[ +(PASSED|FAILED)' $OUT/$f.txt | tr '\n' ' ')"; done
grep -E "Failure|off by more" $OUT/*.txt | head -20
tail -25 $OUT/sweep.txt
