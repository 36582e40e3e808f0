#!/bin/bash
# attention/2: a loop for the clean key blocks and one for the masked ones,
# 32-bit score indices. Every variant against fp64 (GpuAttentionTest), the
# whole attention suite, then ncu of the D64 and the causal D128 kernels
# beside SDPA flash.
cd "$(dirname "$0")/.."
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
timeout 110 $b/bin/kfuse_cross_test --gtest_filter='GpuAttentionTest*' >$OUT/gpu_attention_test.txt 2>&1
echo "GpuAttentionTest rc $?"; grep -E "OK|FAILED|PASSED" $OUT/gpu_attention_test.txt | tail -4
SUITES=attention SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=320 bash bench/gpu/run.sh $b 2>&1 | grep -vE '^\{"case"' | tail -16
w=$(ls -dt /tmp/kfuse-bench.* | head -1)
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $ncu"
for c in "attn_b4h32s4096d64_bf16 4 32 4096 64" "attn_b4h32s4096d128_causal_bf16 4 32 4096 128 causal"; do
  set -- $c
  timeout 90 $ncu --clock-control none -k regex:'kf_attn|flash' -c 2 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats \
    python3 .gpu/profile_attn.py $w/manifests/$1.json $2 $3 $4 $5 $6 >$OUT/ncu_$1.txt 2>&1
  echo "ncu $1 rc $?"; grep -E "max \||Duration|Compute \(SM\) Throughput|Issue Slots Busy|Registers Per" $OUT/ncu_$1.txt
done
