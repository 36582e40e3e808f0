#!/bin/bash
# The H200 run in one command, from the repository root (after
# bench/gpu/prepare.sh here, carrying build/gpu-bundle along):
#
#   bash bench/gpu/run.sh [--quick] [BUNDLE_DIR]   # default: build/gpu-bundle
#
# 1. kfused on loopback with a fresh store; every case of the suites compiled
#    with `kfuse compile --policy full` (tuned on this GPU), then a launch
#    manifest per plan and row count (kfuse-plan-manifest) and the compile's
#    wall seconds beside it (<case>.compile_s);
# 2. per suite, the benchmark against eager PyTorch, torch.compile and the
#    device copy (bench/gpu/suite.py);
# 3. the GPU tests (random chains and row chains against the fp64 evaluator,
#    launcher, runner: fault, hang, wrong results).
# Every stage has a time limit (the whole run fits in SECONDS_TOTAL, default
# 420) and the log streams to $OUT as it goes, so a cut-off run keeps what it
# measured. Results go to bench/results/ and $OUT.
# Environment: SUITES (default "pointwise row"; "matmul" for the GEMM suite,
# "attention" for fused attention; spaces or commas between), CASES
# (comma-separated case names, default all), BUDGET (tuning seconds per
# case, default 2), MATMUL_BUDGET and ATTN_BUDGET (the same for matmul and
# attention cases, default 8 each),
# SKIP_TESTS=1, TESTS ("cross" or "tuner" for one half).
set -uo pipefail
cd "$(dirname "$0")/../.."
quick=""
if [[ "${1:-}" == "--quick" ]]; then quick=--quick; shift; fi
bundle=$(realpath "${1:-build/gpu-bundle}")
bin=$bundle/bin
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
work=$(mktemp -d /tmp/kfuse-bench.XXXXXX)
out=${OUT:-$work/out}
mkdir -p "$work/plans" "$work/manifests" "$out" bench/results
exec > >(tee "$out/run.log") 2>&1
end=$((SECONDS + ${SECONDS_TOTAL:-420}))
left() { echo $((end - SECONDS > 5 ? end - SECONDS : 5)); }
status=0

finish() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  for suite in $suites; do cp bench/results/"$(date +%F)-$suite"* "$out/" 2>/dev/null; done
  cp "$work/kfused.log" "$out/" 2>/dev/null
  tar -C "$work" -czf "$out/plans-and-manifests.tar.gz" plans manifests 2>/dev/null
}
suites=${SUITES:-pointwise row}
suites=${suites//,/ }  # As CASES is written.
trap finish EXIT

nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.used,memory.total --format=csv || true

echo "== kfused"
addr=127.0.0.1:$((7500 + RANDOM % 400))
"$bin/kfused" --address="$addr" --store="$work/store.db" --worker="$bin/kfuse-worker" \
  --gpu_memory_budget=$((48 << 30)) >"$work/kfused.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do "$bin/kfuse" --server "$addr" health >/dev/null 2>&1 && break; sleep 0.2; done
"$bin/kfuse" --server "$addr" device

echo "== compile and tune each case"
python3 bench/gpu/suite.py write-cases "$work/cases" $quick
for suite in $suites; do
  budget=${BUDGET:-2}
  [ "$suite" = matmul ] && budget=${MATMUL_BUDGET:-8}
  [ "$suite" = attention ] && budget=${ATTN_BUDGET:-8}
  whole=${budget%.*}
  climit=$((90 + 2 * ${whole:-0}))  # Compiling the variants comes on top of the budget.
  for chain in "$work/cases/$suite"/*.json; do
    name=$(basename "$chain" .json)
    [ -n "${CASES:-}" ] && [[ ",$CASES," != *",$name,"* ]] && continue
    start=$(date +%s.%N)
    rows=$(cat "$work/cases/$suite/$name.rows" 2>/dev/null)
    if timeout "$climit" "$bin/kfuse" --server "$addr" --timeout "$climit" compile "$chain" \
         -o "$work/plans/$name.pb" --policy full --budget "$budget" >"$work/plans/$name.txt" 2>&1; then
      wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
      echo "$wall" >"$work/manifests/$name.compile_s"
      echo "$name: compiled in $wall s: $(grep -m1 -E '^state' "$work/plans/$name.txt")"
      first=1
      for r in ${rows:-none}; do  # The first row count is the case's own; the rest, its sweep.
        m=$work/manifests/$name.json sym=()
        [ "$r" != none ] && sym=(--sym "rows=$r") && { [ $first = 1 ] || m=$work/manifests/$name@$r.json; }
        "$bin/kfuse-plan-manifest" --plan "$work/plans/$name.pb" --out "$m" "${sym[@]}" || status=1
        first=0
      done
    else
      echo "$name: FAILED"; cat "$work/plans/$name.txt"; status=1
    fi
  done
done

nsuites=$(wc -w <<<"$suites")
for suite in $suites; do  # Each suite gets its share of what is left.
  bench_s=$(( ($(left) - ${TESTS_RESERVE:-70}) / nsuites )); ((bench_s > 10)) || bench_s=10
  nsuites=$((nsuites - 1))
  echo "== benchmark: $suite suite (limit $bench_s s)"
  timeout "$bench_s" python3 bench/gpu/suite.py bench --suite "$suite" \
    --manifests "$work/manifests" --out bench/results $quick ${CASES:+--cases "$CASES"}
  [ $? = 0 ] || status=1
done

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "== GPU tests"
  if [ "${TESTS:-cross}" = cross ]; then
    timeout $(( $(left) / 2 )) "$bin/kfuse_cross_test" --gtest_filter='GpuChains*:RandomChains*:GpuRow*:GpuReduce*' 2>&1 |
      grep -vE "^\[ RUN|^\[       OK" | tail -40
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  fi
  if [ "${TESTS:-tuner}" = tuner ]; then
    timeout "$(left)" "$bin/kfuse_tuner_test" --gtest_filter='RunnerGpu*:WorkerKernelsGpu*' 2>&1 |
      grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) |tests ran"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  fi
fi
exit $status
