#!/bin/bash
# Run at 5061fd7 (with run201 in the same call).
# run200: to be built at the commit it runs on (written at 3944b41; since
# then the GPU tests also hold RunnerGpuTest.ACancelledTaskStopsAndKeepsItsWorker,
# worker protocol 4's cancel on the real worker). (1) kfuse_tuner_test's GPU tests: TuneKernelGpuTest
# again (run199 found the seed winning past faster candidates not yet checked
# at the other sizes, fixed) and CheckKernelGpuTest (a recompiled winner
# checked: passes as generated, caught with a tail bug planted); (2) then,
# alone on the GPU, RECHECK=1 bench/gpu/tune_sweep.sh: every bench case tuned
# (quick), the store's artifacts deleted, every case asked again from a fresh
# kfused, so each stored winner is recompiled and checked (CheckKernel) on
# the H200 before it serves.
# Made here: build/gpu-run200.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse_cross_test, kfuse_client_test, kfuse_cuda_test and
# kfuse-plan-manifest, packed with xz).
mkdir -p /tmp/k && xz -dc build/gpu-run200.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run200
cuda=/usr/local/cuda-13.0/targets/x86_64-linux/lib
LD_LIBRARY_PATH=$b/lib:$cuda timeout 300 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*' \
  > $OUT/tuner_tests.txt 2>&1
echo "tuner_test rc=$?" >> $OUT/tuner_tests.txt
grep -E "rc=|^\[ +(FAILED|PASSED)|TuneKernelGpu|CheckKernelGpu|ACancelledTask" $OUT/tuner_tests.txt
LD_LIBRARY_PATH=$cuda RECHECK=1 bash bench/gpu/tune_sweep.sh $b "$OUT"
tail -4 "$OUT/sweep.txt"
