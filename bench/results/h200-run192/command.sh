#!/bin/bash
# run192: run191's cancellation trial done right (SIGTERM: a command started
# with & in a script ignores SIGINT). A full tune with a 120 s budget of the
# 8192^3 GEMM (16.9 s when left to finish, run191) whose caller is killed
# after 4 s (KILL_AFTER=10: 10 s, within its run on the GPU); then a quick tune of a small chain, timed: it waits for the GPU
# only as long as the cancelled run takes to stop. Then the same with the
# caller left alone, for the uncancelled duration in this run.
b=$PWD/build/gpu-run191
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
$b/bin/kfused --address=127.0.0.1:7455 --store=/tmp/cancel.db --worker=$b/bin/kfuse-worker > $OUT/kfused.log 2>&1 &
k=$!
c="$b/bin/kfuse --server 127.0.0.1:7455"
for i in $(seq 1 100); do $c health >/dev/null 2>&1 && break; sleep 0.3; done
{
  s0=$(date +%s%N)
  $c --timeout 200 tune --mode full --budget 120 bench/gpu/cases/matmul/gemm_bias_gelu_8192_bf16.json > $OUT/long.txt 2>&1 &
  t=$!; sleep ${KILL_AFTER:-4}; kill -TERM $t; wait $t; echo "long tune's caller killed: rc=$? after $(ms $s0) ms"
  s=$(date +%s%N)
  $c --timeout 200 tune bench/gpu/cases/pointwise/relu_fma_f32.json > /tmp/short.txt 2>&1
  echo "the next tune (relu_fma_f32, quick) rc=$? in $(ms $s) ms"
  s=$(date +%s%N)
  $c --timeout 200 tune --mode full --budget 120 bench/gpu/cases/matmul/gemm_bias_gelu_m16_bf16.json > /tmp/m16.txt 2>&1
  echo "uncancelled: gemm m16 full tune rc=$? in $(ms $s) ms"
} > $OUT/cancel.txt 2>&1
kill $k; wait $k
cat $OUT/cancel.txt
echo "builds logged:"; grep " build " $OUT/kfused.log | grep -oE "trials=[0-9]+ failed_trials=[0-9]+ seconds=[0-9.]+"
# Run three times on one warm machine (bench/results/h200-run192):
#   KILL_AFTER=4 (cancel_after_4s.txt): the next tune in 971 ms; no build
#     stored for the cancelled tune (it may still have been compiling);
#   KILL_AFTER=10, store removed first (cancel_after_10s_finished_first.txt):
#     the warm tune finished in 8.8 s, before the kill; not a trial;
#   KILL_AFTER=6, store removed first (cancel_after_6s.txt, long_after_6s.txt,
#     kfused_after_6s.log): the caller saw 15 of 24 trials, so the run was on
#     the GPU; the next tune took 1128 ms with a fresh worker; no build logged
#     or stored for the cancelled tune.
