#!/bin/bash
# Diagnostics for the row family: every trial's time for four cases, and
# Nsight Compute on the tuned bf16 softmax (width 4096).
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/gpu-bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PYTHONUNBUFFERED=1
b=$PWD/build/gpu-bundle/bin
work=$(mktemp -d /tmp/kf.XXXXXX)
addr=127.0.0.1:7611
$b/kfused --address=$addr --store=$work/store.db --worker=$b/kfuse-worker --gpu_memory_budget=$((48<<30)) > $work/kfused.log 2>&1 &
for _ in $(seq 1 300); do $b/kfuse --server $addr health >/dev/null 2>&1 && break; sleep 0.2; done
python3 bench/gpu/suite.py write-cases $work/cases > /dev/null
for c in softmax_bf16_4096 softmax_bf16_1024 softmax_bf16_50257 layer_norm_bf16_1024 softmax_f32_50257; do
  echo "== tune $c"
  timeout 60 $b/kfuse --server $addr tune $work/cases/row/$c.json --mode full --budget 12 --force 2>&1 | tee $OUT/tune_$c.txt | tail -3
done
mkdir -p $work/manifests $work/res
$b/kfuse --server $addr compile $work/cases/row/softmax_bf16_4096.json -o $work/p.pb | grep -E 'variant|resources'
$b/kfuse-plan-manifest --plan $work/p.pb --out $work/manifests/softmax_bf16_4096.json --sym rows=32768
which ncu
echo "== ncu"
timeout 240 ncu --clock-control none -k regex:kf_row -c 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats \
  python3 bench/gpu/suite.py bench --suite row --manifests $work/manifests --out $work/res --cases softmax_bf16_4096 > $OUT/ncu_softmax_bf16_4096.txt 2>&1
echo "ncu rc $?"; grep -E 'Throughput|Occupancy|Registers|Stall|Warp Cycles|Issued|Eligible|Active Warps|Block Limit' $OUT/ncu_softmax_bf16_4096.txt | head -60
