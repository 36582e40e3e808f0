#!/bin/bash
# The operations checks on a GPU machine, from the repository root (after
# bench/gpu/prepare.sh here, carrying build/gpu-bundle along):
#
#   bash bench/gpu/ops.sh [BUNDLE_DIR]          # default: build/gpu-bundle
#
# 1. the GPU tests of the tuning pool and the NVML load probe;
# 2. cold start: a caller with a 1 s deadline gets the heuristic kernel at
#    once while tuning goes on; the next caller gets the tuned plan;
# 3. shared GPU: with --tune_max_gpu_busy=0.2, a tuning request made while
#    another process keeps the GPU busy waits until that process stops;
# 4. tuning throughput: K distinct chains tuned (full, BUDGET s each) by one kfused with
#    --devices=0, then with --devices=0,1 (each on a fresh store): the ratio.
# Output streams to $OUT/ops.log. Environment: K (default 16 chains),
# BUDGET (default 2 s of tuning per chain), KFUSED_FLAGS (extra kfused flags
# for step 4), ELEMENTS (default 2^24 per
# tensor), HOG_SECONDS (default 8), STEPS (default "1 2 3 4").
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=$(realpath "${1:-build/gpu-bundle}")
bin=$bundle/bin
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
work=$(mktemp -d /tmp/kfuse-ops.XXXXXX)
out=${OUT:-$work/out}
mkdir -p "$out"
exec > >(tee "$out/ops.log") 2>&1
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; cp "$work"/*.log "$out/" 2>/dev/null' EXIT
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv

# kfused NAME ARGS...: a node on a fresh store and port; sets $addr.
kfused() {
  local name=$1
  shift
  addr=127.0.0.1:$((7500 + RANDOM % 400))
  "$bin/kfused" --address="$addr" --store="$work/$name.db" --worker="$bin/kfuse-worker" \
    --gpu_memory_budget=$((16 << 30)) --log_format=json "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do "$bin/kfuse" --server "$addr" health >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "kfused $name did not start"; tail -5 "$work/$name.log"; return 1
}
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  pids=()
}
# chain N FILE: a 6-op bf16 chain on ELEMENTS elements whose constant makes its key new.
chain() {
  python3 - "$1" "$2" "${ELEMENTS:-16777216}" <<'EOF'
import json, sys
n, out, elements = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = 1.0 + (n % 127 + 1) / 128.0
t = lambda name: {"name": name, "dtype": "DTYPE_BF16", "shape": [{"size": str(elements)}]}
json.dump({"inputs": [t("x"), t("y")],
           "ops": [{"kind": "OP_CONSTANT", "dtype": "DTYPE_BF16", "value": c},
                   {"kind": "OP_MUL", "args": [{"input": 0}, {"op": 0}]},
                   {"kind": "OP_SILU", "args": [{"op": 1}]},
                   {"kind": "OP_MUL", "args": [{"op": 2}, {"input": 1}]},
                   {"kind": "OP_TANH", "args": [{"op": 3}]},
                   {"kind": "OP_ADD", "args": [{"op": 4}, {"input": 0}]}],
           "outputs": [{"name": "out", "value": {"op": 5}}]}, open(out, "w"))
EOF
}
# show FILE: cache outcome, state, background flag and tuning seconds of a --json answer.
show() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d.get("plan",{}).get("provenance",{}); print(d.get("cache"), p.get("state"), "tuning_in_background=%s" % d.get("tuningInBackground", d.get("tuning_in_background", False)), "tuning_seconds=%s" % p.get("tuningSeconds", p.get("tuning_seconds")))' "$1"
}

steps=" ${STEPS:-1 2 3 4} "
if [[ $steps == *" 1 "* ]]; then
echo "== 1. GPU tests: tuning pool and NVML probe"
timeout 120 "$bin/kfuse_tuner_test" --gtest_filter='*Gpu*:*Nvml*' 2>&1 | grep -E "OK \]|FAILED|SKIPPED|PASSED" | grep -E "Nvml|Pool|GpuLoad|PASSED|FAILED|SKIPPED"

fi
if [[ $steps == *" 2 "* ]]; then
echo "== 2. cold start"
kfused cold || exit 1
chain 1 "$work/cold.json"
t0=$(date +%s.%N)
"$bin/kfuse" --server "$addr" --timeout 1 --json compile "$work/cold.json" >"$work/cold1.json" 2>&1
t1=$(date +%s.%N)
echo "first call (1 s deadline): $(show "$work/cold1.json") in $(python3 -c "print(round($t1 - $t0, 3))") s"
for _ in $(seq 1 100); do
  "$bin/kfuse" --server "$addr" --timeout 30 --json compile "$work/cold.json" >"$work/cold2.json" 2>&1
  grep -q TUNE_STATE_TUNED "$work/cold2.json" && break
  sleep 0.2
done
echo "next call: $(show "$work/cold2.json")"
stop_all

fi
if [[ $steps == *" 3 "* ]]; then
echo "== 3. shared GPU: tuning waits for idle time"
kfused idle --tune_max_gpu_busy=0.2 --tune_max_wait_seconds=60 || exit 1
hog=${HOG_SECONDS:-8}
python3 - "$hog" >"$work/hog.log" 2>&1 <<'EOF' &
import sys, time, torch
end = time.time() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("hog start", time.time(), flush=True)
while time.time() < end:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
print("hog end", time.time(), flush=True)
EOF
hog_pid=$!
for _ in $(seq 1 300); do grep -q "hog start" "$work/hog.log" && break; sleep 0.1; done
sleep 1  # NVML's utilization window sees the hog.
chain 2 "$work/idle.json"
t0=$(date +%s.%N)
"$bin/kfuse" --server "$addr" --timeout 120 --json compile "$work/idle.json" >"$work/idle1.json" 2>&1
t1=$(date +%s.%N)
wait "$hog_pid"
cat "$work/hog.log"
echo "tune requested at $t0, answered at $t1: $(show "$work/idle1.json")"
python3 - "$t0" "$t1" "$work/hog.log" <<'EOF'
import sys
t0, t1 = float(sys.argv[1]), float(sys.argv[2])
marks = dict(l.split()[1:] for l in open(sys.argv[3]) if l.startswith("hog "))
end = float(marks["end"])
print("the other process stopped %.2f s after the request; the answer came %.2f s after it stopped" % (end - t0, t1 - end))
EOF
grep -o '"event":"tuning_gpu"[^}]*' "$work/idle.log" | head -3
stop_all

fi
if [[ $steps == *" 4 "* ]]; then
echo "== 4. tuning throughput, $gpus GPU(s) visible, $((${ELEMENTS:-16777216})) elements a tensor, full tuning, ${BUDGET:-2} s budget"
k=${K:-16}
for i in $(seq 1 "$k"); do chain $((100 + i)) "$work/t1_$i.json"; chain $((300 + i)) "$work/t2_$i.json"; done
run_batch() {  # run_batch PREFIX: every chain of the batch at once; prints seconds
  local t0 t1 p=()
  t0=$(date +%s.%N)
  for i in $(seq 1 "$k"); do
    "$bin/kfuse" --server "$addr" --timeout 600 --json compile --policy full --budget "${BUDGET:-2}" \
      "$work/$1_$i.json" >"$work/$1_$i.out" 2>&1 &
    p+=($!)
  done
  wait "${p[@]}"
  t1=$(date +%s.%N)
  python3 -c "print(round($t1 - $t0, 2))"
}
trials() { grep -o '"trials":"[0-9]*"' "$work/$1.log" | grep -o '[0-9]*' | awk '{ s += $1 } END { print s + 0 }'; }
kfused one --devices=0 --threads=8 ${KFUSED_FLAGS:-} || exit 1
s1=$(run_batch t1)
tuned1=$(grep -l TUNE_STATE_TUNED "$work"/t1_*.out | wc -l)
stop_all
if [[ $gpus -ge 2 ]]; then
  kfused two --devices=0,1 --threads=8 ${KFUSED_FLAGS:-} || exit 1
  s2=$(run_batch t2)
  tuned2=$(grep -l TUNE_STATE_TUNED "$work"/t2_*.out | wc -l)
  stop_all
  n1=$(trials one)
  n2=$(trials two)
  echo "one GPU: $k chains, $n1 trials in $s1 s ($tuned1 tuned); two GPUs: $k chains, $n2 trials in $s2 s ($tuned2 tuned)"
  python3 -c "print('throughput ratio (two / one): %.2f chains/s, %.2f trials/s' % ($s1 / $s2, ($n2 / $s2) / ($n1 / $s1)))"
else
  echo "one GPU: $k chains in $s1 s ($tuned1 tuned); a second GPU is not visible here"
fi
fi
