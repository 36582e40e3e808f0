#!/bin/bash
# run199: at 179b821, where a kernel with symbolic dims is checked at two
# other sizes before it wins. (1) kfuse_tuner_test's GPU tests, with
# TuneKernelGpuTest (a planted tail bug right only at the bucket loses; the
# generated kernels pass at every size); (2) then, alone on the GPU, every
# bench case tuned through kfused in quick mode (bench/gpu/tune_sweep.sh),
# its per-case times beside run198's for what the new checks cost.
# Made here: build/gpu-run199.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse_cross_test, kfuse_client_test, kfuse_cuda_test and
# kfuse-plan-manifest, packed with xz).
mkdir -p /tmp/k && xz -dc build/gpu-run199.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run199
cuda=/usr/local/cuda-13.0/targets/x86_64-linux/lib
LD_LIBRARY_PATH=$b/lib:$cuda timeout 300 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*' \
  > $OUT/tuner_tests.txt 2>&1
echo "tuner_test rc=$?" >> $OUT/tuner_tests.txt
grep -E "rc=|^\[ +(FAILED|PASSED)|TuneKernelGpu" $OUT/tuner_tests.txt
LD_LIBRARY_PATH=$cuda bash bench/gpu/tune_sweep.sh $b "$OUT"
tail -8 "$OUT/sweep.txt"
