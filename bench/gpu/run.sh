#!/bin/bash
# The H200 run in one command, from the repository root (after
# bench/gpu/prepare.sh here, carrying build/gpu-bundle along):
#
#   bash bench/gpu/run.sh [--quick] [BUNDLE_DIR]   # default: build/gpu-bundle
#
# 1. the GPU tests (random chains against the fp64 evaluator, launcher);
# 2. kfused on loopback with a fresh store; every case compiled with
#    `kfuse compile --policy full` (tuned on this GPU), then a launch
#    manifest per plan (kfuse-plan-manifest);
# 3. the benchmark against eager PyTorch, torch.compile and the device copy.
# Results go to bench/results/ and, when OUT is set, to $OUT with the logs.
# Environment: BUDGET (tuning seconds per case, default 8), SKIP_TESTS=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
quick=""
if [[ "${1:-}" == "--quick" ]]; then quick=--quick; shift; fi
bundle=$(realpath "${1:-build/gpu-bundle}")
bin=$bundle/bin
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
work=$(mktemp -d /tmp/kfuse-bench.XXXXXX)
mkdir -p "$work/plans" "$work/manifests" bench/results
status=0

# $OUT takes few files: the results, the logs, and one archive of the rest.
finish() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    cp bench/results/"$(date +%F)"-pointwise* "$work"/*.log "$OUT/" 2>/dev/null
    tar -C "$work" -czf "$OUT/plans-and-manifests.tar.gz" plans manifests 2>/dev/null
  fi
}
trap finish EXIT

nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv || true

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== GPU tests"
  "$bin/kfuse_cross_test" --gtest_filter='GpuChains*:RandomChains*:BenchCases*' 2>&1 | tee "$work/gpu_tests.log" | tail -60
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

echo "== kfused"
addr=127.0.0.1:$((7500 + RANDOM % 400))
"$bin/kfused" --address="$addr" --store="$work/store.db" --worker="$bin/kfuse-worker" \
  --gpu_memory_budget=$((48 << 30)) >"$work/kfused.log" 2>&1 &
pid=$!
for _ in $(seq 1 150); do "$bin/kfuse" --server "$addr" health >/dev/null 2>&1 && break; sleep 0.2; done
"$bin/kfuse" --server "$addr" device | tee "$work/device.log"

echo "== compile and tune each case"
python3 bench/gpu/run_pointwise.py write-cases "$work/cases" $quick
for chain in "$work"/cases/*.json; do
  name=$(basename "$chain" .json)
  start=$SECONDS
  if "$bin/kfuse" --server "$addr" --timeout 300 compile "$chain" -o "$work/plans/$name.pb" \
       --policy full --budget "${BUDGET:-8}" >"$work/plans/$name.txt" 2>&1 &&
     "$bin/kfuse-plan-manifest" --plan "$work/plans/$name.pb" --out "$work/manifests/$name.json"; then
    echo "$name: compiled in $((SECONDS - start)) s: $(grep -m1 -i -E 'tuned|heuristic' "$work/plans/$name.txt")"
  else
    echo "$name: FAILED"; cat "$work/plans/$name.txt"; status=1
  fi
done

echo "== benchmark"
python3 bench/gpu/run_pointwise.py bench --manifests "$work/manifests" --out bench/results $quick \
  2>&1 | tee "$work/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
