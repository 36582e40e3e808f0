#!/bin/bash
# run195: run194 found the suites' eager yardstick (tests/gpu_test_util.h
# EagerError) did not count eager's far elements (every message said
# "eager: 0"), and elements far below the output's scale (an underflow, a
# flush to zero) counted as far. With eager's count and a floor of 2^-10 of
# the largest reference value: the suites that failed in run194 (chains,
# reduce chains, attention, matmul), and the GPU tests of kfuse_tuner_test
# (the compare's two passes on the GPU against the host).
# Made here: build/gpu-run195.tar.xz (bench/gpu/prepare.sh, the bundle less
# kfuse-plan-manifest, packed with xz to fit the carry).
mkdir -p /tmp/k && xz -dc build/gpu-run195.tar.xz | tar -C /tmp/k -xf - || exit 1
b=/tmp/k/gpu-run195
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
x=$b/bin/kfuse_cross_test
timeout 400 $x --gtest_filter='GpuMatmulTest.*' > $OUT/matmul.txt 2>&1 & p1=$!
( timeout 150 $x --gtest_filter='GpuChainsTest.*:GpuLayoutTest.*:GpuReduceChainsTest.*'
  timeout 250 $x --gtest_filter='GpuAttentionTest.*:GpuReduceTest.*' ) > $OUT/suites.txt 2>&1 & p2=$!
{ timeout 240 $b/bin/kfuse_tuner_test --gtest_filter='*Gpu*'; echo "tuner_test rc=$?"; } > $OUT/service_tests.txt 2>&1
grep -E "rc=|^\[ +(FAILED|PASSED)" $OUT/service_tests.txt
wait $p1 $p2
for f in matmul suites; do echo "$f: $(grep -E '^\[ +(PASSED|FAILED)' $OUT/$f.txt | tr '\n' ' ')"; done
grep -h "off by more" $OUT/*.txt | sed -E 's/.*(output [0-9]+: )/\1/' | sort | uniq -c | sort -rn | head -20
