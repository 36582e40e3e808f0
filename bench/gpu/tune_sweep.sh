#!/bin/bash
# Every bench case tuned through a kfused of BUNDLE (bench/gpu/prepare.sh's
# layout: bin/, lib/) with `kfuse tune`, one line a case (exit code, time,
# the plan's last line), then the trial outcomes and builds kfused counted
# and every log line saying a kernel was judged wrong. Whether the check
# refuses a right kernel, or a case stopped tuning, shows here. Without a
# GPU every case is answered heuristic (`kfuse tune` exits 1, "not tuned"),
# which checks the script.
#
# RECHECK=1: then kfused stops, the store's artifacts are deleted (its
# decisions kept, as after a toolchain or generator upgrade), and every case
# is asked again from a fresh kfused: each stored winner is recompiled and
# checked before it serves (recheck.txt; the builds that reused a decision,
# and any stored_decision_failed or _unchecked event).
#
#   [RECHECK=1] [FAMILIES="row matmul"] bash bench/gpu/tune_sweep.sh BUNDLE OUT_DIR [MODE]
#   # MODE: quick (default) or full; FAMILIES: the case folders (default: all five);
#   # paths absolute or from the repository root
set -u
cd "$(dirname "$0")/../.."
b=$1 out=$2 mode=${3:-quick}
families=${FAMILIES:-pointwise row reduce matmul attention}
for fam in $families; do
  [ -d "bench/gpu/cases/$fam" ] || { echo "tune_sweep.sh: no bench/gpu/cases/$fam (FAMILIES)" >&2; exit 2; }
done
mkdir -p "$out"
export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
store=$(mktemp -d)/sweep.db
c="$b/bin/kfuse --server 127.0.0.1:7455"
k=
start() {  # LOG
  "$b/bin/kfused" --address=127.0.0.1:7455 --store="$store" --metrics_address=127.0.0.1:9455 \
    --worker="$b/bin/kfuse-worker" > "$1" 2>&1 &
  k=$!
  for i in $(seq 1 100); do $c health >/dev/null 2>&1 && break; sleep 0.3; done
}
sweep() {
  for f in $(for fam in $families; do ls bench/gpu/cases/$fam/*.json; done); do
    s=$(date +%s%N)
    timeout 120 $c --timeout 120 tune --mode "$mode" "$f" > "$out/one.txt" 2>&1; rc=$?
    printf '%-62s rc=%d %6d ms  %s\n' "$f" $rc $(( ($(date +%s%N) - s) / 1000000 )) \
      "$(tail -1 "$out/one.txt" | head -c 150)"
  done
  python3 -c "
import urllib.request
for l in urllib.request.urlopen('http://127.0.0.1:9455/metrics').read().decode().splitlines():
    if l.startswith('kfuse_trials_total') or l.startswith('kfuse_tuning_seconds_count'): print(l)
"
  rm -f "$out/one.txt"
  kill $k
  wait $k
}
start "$out/kfused.log"
sweep > "$out/sweep.txt"
echo "cases ok: $(grep -c ' rc=0 ' "$out/sweep.txt") of $(grep -c ' rc=' "$out/sweep.txt")" | tee -a "$out/sweep.txt"
grep -hE "off by more|wrong_result|passed at|failed on the GPU|heuristic_withdrawn" "$out/kfused.log" | head -20 | tee -a "$out/sweep.txt"
if [ "${RECHECK:-0}" = 1 ]; then
  python3 -c "
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute('DELETE FROM artifacts').rowcount
db.commit()
print('artifacts deleted:', n, 'decisions kept:', db.execute('SELECT COUNT(*) FROM decisions').fetchone()[0])
" "$store" > "$out/recheck.txt"
  start "$out/kfused-recheck.log"
  sweep >> "$out/recheck.txt"
  {
    echo "cases ok: $(grep -c ' rc=0 ' "$out/recheck.txt") of $(grep -c ' rc=' "$out/recheck.txt")"
    echo "builds reusing a decision: $(grep -c 'reused_decision=true' "$out/kfused-recheck.log")"
    grep -hE "stored_decision_(failed|unchecked)|wrong_result|passed at" "$out/kfused-recheck.log" | head -20
  } | tee -a "$out/recheck.txt"
fi
