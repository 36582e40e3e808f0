#!/usr/bin/env bash
# End-to-end: a short bounded load on a real kfused (--no_gpu) on loopback,
# and one check per limit kfused enforces. Run by ctest as:
# bash load_test.sh BUILD_DIR (from the source root). Ends with
# "N passed, M failed"; exit 1 on failure.
set -u

build=${1:?usage: load_test.sh BUILD_DIR}
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
kfused=$build/service/kfused
kfuse=$build/clients/kfuse
load=$build/bench/kfuse-load
for bin in "$kfused" "$kfuse" "$load"; do
  if [[ ! -x $bin ]]; then
    echo "missing $bin: build targets kfused, kfuse and kfuse-load first" >&2
    exit 1
  fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-load.XXXXXX")
server_pid=""

stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 1 100); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  server_pid=""
}
cleanup() {
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT

source "$(dirname "$0")/lib.sh"


# start_server KFUSED-FLAGS...: a fresh store, a fresh port, bounded wait.
start_server() {
  local attempt i
  for attempt in 1 2 3; do
    export KFUSE_SERVER=127.0.0.1:$(free_port)
    "$kfused" --address="$KFUSE_SERVER" --store="$tmp/kfuse-$attempt-$RANDOM.db" --no_gpu "$@" \
      >>"$tmp/kfused.log" 2>&1 &
    server_pid=$!
    for i in $(seq 1 100); do
      kill -0 "$server_pid" 2>/dev/null || break
      if "$kfuse" --timeout 2 health >/dev/null 2>&1; then return 0; fi
      sleep 0.1
    done
    stop_server
  done
  echo "kfused did not become SERVING; its log:" >&2
  cat "$tmp/kfused.log" >&2
  return 1
}

# chain KIND N > file: chains at and past each limit, in the JSON mapping.
chain() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
kind, n = sys.argv[1], int(sys.argv[2])
def t(name, shape): return {"name": name, "dtype": "DTYPE_F32", "shape": [{"size": str(s)} for s in shape]}
if kind == "inputs":     # n inputs summed
    inputs = [t("x%d" % i, [1024]) for i in range(n)]
    ops = [{"kind": "OP_ADD", "args": [{"input": 0}, {"input": 1}]}]
    for i in range(2, n): ops.append({"kind": "OP_ADD", "args": [{"op": len(ops) - 1}, {"input": i}]})
elif kind == "ops":      # n ops in a row
    inputs = [t("x", [1024])]
    ops = [{"kind": "OP_RELU", "args": [{"input": 0}]}]
    while len(ops) < n: ops.append({"kind": "OP_NEG", "args": [{"op": len(ops) - 1}]})
elif kind == "rank":     # rank n
    inputs = [t("x", [2] * n)]
    ops = [{"kind": "OP_RELU", "args": [{"input": 0}]}]
elif kind == "elements": # 2^n elements
    inputs = [t("x", [1 << (n - n // 2), 1 << (n // 2)])]
    ops = [{"kind": "OP_RELU", "args": [{"input": 0}]}]
print(json.dumps({"inputs": inputs, "ops": ops, "outputs": [{"name": "y", "value": {"op": len(ops) - 1}}]}))
EOF
}

# expect NAME CODE FILE: kfuse compile FILE fails with CODE (OK: succeeds).
expect() {
  local out rc
  out=$("$kfuse" --timeout 30 compile "$3" 2>&1)
  rc=$?
  if [[ $2 == OK ]]; then
    check "$1" $rc "$out"
  else
    [[ $rc -ne 0 && $out == *"$2"* ]]
    check "$1" $? "rc=$rc $(head -c 600 <<<"$out")"
  fi
}

cd "$src"

# 1. Bounded load: 50 clients, 5 s, hits, misses and bad requests, on one job
#    thread with a queue of 2 so that misses overflow it.
if start_server --threads=1 --max_queued_jobs=2; then
  pass "kfused starts (--threads=1 --max_queued_jobs=2)"
  out=$("$load" --server="$KFUSE_SERVER" --clients=50 --clients_per_channel=10 --duration=5 \
    --hit_fraction=0.8 --miss_fraction=0.1 --bad_fraction=0.1 --hit_chains=4 --deadline=20 2>&1)
  rc=$?
  echo "$out" | sed 's/^/    /'
  check "load: only intended codes, nothing lost (exit 0)" $rc "$out"
  [[ $out == *"lost=0 duplicate=0 wrong_answer=0 unintended=0 ok_misses_not_stored=0/"* ]]
  check "load: every call completed once, every OK miss stored" $? "$out"
  grep -q '^miss .*RESOURCE_EXHAUSTED=[1-9]' <<<"$out"
  check "load: a full queue answers RESOURCE_EXHAUSTED" $? "$out"
  grep -q '^bad .*INVALID_ARGUMENT=[1-9]' <<<"$out"
  check "load: malformed chains answer INVALID_ARGUMENT" $? "$out"
  grep -q '^hit .* OK=[1-9][0-9]*$' <<<"$out"
  check "load: hits are all OK" $? "$out"
  "$kfuse" --timeout 5 health 2>&1 | grep -q SERVING
  check "kfused still SERVING after the load" $? "$(tail -20 "$tmp/kfused.log")"
  stop_server
else
  fail "kfused starts (--threads=1 --max_queued_jobs=2)"
fi

# 2. Validation limits (codegen/validate.h Limits) and the message size limit.
if start_server --max_message_bytes=262144; then
  pass "kfused starts (--max_message_bytes=262144)"
  chain inputs 64 >"$tmp/in64.json"; expect "64 inputs: accepted" OK "$tmp/in64.json"
  chain inputs 65 >"$tmp/in65.json"; expect "65 inputs: INVALID_ARGUMENT" INVALID_ARGUMENT "$tmp/in65.json"
  chain rank 8 >"$tmp/r8.json"; expect "rank 8: accepted" OK "$tmp/r8.json"
  chain rank 9 >"$tmp/r9.json"; expect "rank 9: INVALID_ARGUMENT" INVALID_ARGUMENT "$tmp/r9.json"
  chain elements 41 >"$tmp/e41.json"; expect "2^41 elements: INVALID_ARGUMENT" INVALID_ARGUMENT "$tmp/e41.json"
  chain ops 513 >"$tmp/o513.json"; expect "513 ops: INVALID_ARGUMENT" INVALID_ARGUMENT "$tmp/o513.json"
  # 60000 ops are ~300 KB on the wire: refused by gRPC before translation.
  chain ops 60000 >"$tmp/o60000.json"
  expect "a request past --max_message_bytes: RESOURCE_EXHAUSTED" RESOURCE_EXHAUSTED "$tmp/o60000.json"
  "$kfuse" --timeout 5 health 2>&1 | grep -q SERVING
  check "kfused still SERVING after the refusals" $? "$(tail -20 "$tmp/kfused.log")"
  stop_server
else
  fail "kfused starts (--max_message_bytes=262144)"
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
