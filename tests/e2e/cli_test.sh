#!/usr/bin/env bash
# End-to-end: the `kfuse` CLI against a real kfused on loopback, without a GPU
# (--no_gpu: heuristic kernels). Run by ctest as: bash cli_test.sh BUILD_DIR
# (from the source root). Ends with "N passed, M failed"; exit 1 on failure.
set -u

build=${1:?usage: cli_test.sh BUILD_DIR}
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
kfused=$build/service/kfused
kfuse=$build/clients/kfuse
for bin in "$kfused" "$kfuse"; do
  if [[ ! -x $bin ]]; then
    echo "missing $bin: build targets kfused and kfuse first" >&2
    exit 1
  fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-e2e.XXXXXX")
store=$tmp/kfuse.db
server_pid=""

cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

source "$(dirname "$0")/lib.sh"


# Starts kfused on a fresh port and waits (bounded) for SERVING. Sets
# server_pid and KFUSE_SERVER; retries with another port if the bind raced.
start_server() {
  local attempt i
  for attempt in 1 2 3; do
    local port
    port=$(free_port)
    export KFUSE_SERVER=127.0.0.1:$port
    "$kfused" --address="$KFUSE_SERVER" --store="$store" --no_gpu \
      >>"$tmp/kfused.log" 2>&1 &
    server_pid=$!
    for i in $(seq 1 100); do
      if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
      if "$kfuse" --timeout 2 health >/dev/null 2>&1; then return 0; fi
      sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=""
  done
  echo "kfused did not become SERVING; its log:" >&2
  cat "$tmp/kfused.log" >&2
  return 1
}

# Sends SIGTERM and waits up to 10 s; returns kfused's exit code (124: hung).
stop_server() {
  local i
  kill -TERM "$server_pid"
  for i in $(seq 1 100); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      wait "$server_pid"
      local rc=$?
      server_pid=""
      return $rc
    fi
    sleep 0.1
  done
  return 124
}

cd "$src"

if ! start_server; then
  fail "kfused starts and reports SERVING"
  echo "$passed passed, $failed failed"
  exit 1
fi
pass "kfused starts and reports SERVING"

# A second kfused on the same address refuses to start (gRPC's default
# SO_REUSEPORT would let it share the port and answer half the calls).
out=$(timeout 20 "$kfused" --address="$KFUSE_SERVER" --store="$tmp/second.db" --no_gpu 2>&1)
rc=$?
[[ $rc == 1 && $out == *"cannot listen on $KFUSE_SERVER (--address): the address is in use"* &&
   $(grep -c . <<< "$out") == 1 && ! -e $tmp/second.db ]]
check "a second kfused on the same address exits 1, in one line, before making its store" $? "rc=$rc $out"
out=$("$kfused" stray --no_gpu 2>&1)
rc=$?
[[ $rc == 2 && $out == *"unexpected argument 'stray'"* ]]
check "kfused refuses a stray argument (exit 2)" $? "rc=$rc $out"
out=$("$kfused" --address=bogus --no_gpu 2>&1)
rc=$?
[[ $rc == 2 && $out == *"--address bogus: expected HOST:PORT or unix:PATH"* ]]
check "kfused refuses an address without a port (exit 2)" $? "rc=$rc $out"
out=$("$kfused" --address=127.0.0.1:99999 --store="$tmp/refused.db" --no_gpu 2>&1)
rc=$?
[[ $rc == 2 && $out == *"--address 127.0.0.1:99999: the port must be a number from 0"* && ! -e $tmp/refused.db ]]
check "kfused refuses a port past 65535 (exit 2)" $? "rc=$rc $out"
# Port 0 takes a free port, and kfused says which.
out=$(timeout 3 "$kfused" --address=127.0.0.1:0 --store="$tmp/any-port.db" --no_gpu 2>&1)
[[ $out =~ serving\ on\ 127\.0\.0\.1:[1-9][0-9]*, ]]
check "kfused on port 0 names the port it took" $? "$out"
# Bad flags are refused before anything is made: no store, no signing key.
out=$("$kfused" --address=127.0.0.1:1 --store="$tmp/refused.db" --max_message_bytes=0 --no_gpu 2>&1)
rc=$?
[[ $rc == 2 && $out == *"--max_message_bytes must be at least 65536"* && ! -e $tmp/refused.db &&
   ! -e $tmp/refused.db.signing-key ]]
check "kfused refuses --max_message_bytes=0 and leaves no files (exit 2)" $? "rc=$rc $out"
out=$("$kfused" --address=127.0.0.1:1 --store="$tmp/refused.db" --threads=0 --no_gpu 2>&1)
rc=$?
[[ $rc == 2 && ! -e $tmp/refused.db && ! -e $tmp/refused.db.signing-key ]]
check "kfused refuses --threads=0 and leaves no files (exit 2)" $? "rc=$rc $out"
for bad in "--devices=0,,1|--devices: \"\" is not a GPU ordinal" "--device=-1|--device must be a GPU ordinal" \
           "--gpu_memory_budget=0|--gpu_memory_budget must be a positive" \
           "--tune_max_wait_seconds=nan|--tune_max_wait_seconds must be a finite" \
           "--tune_max_gpu_busy=nan|--tune_max_gpu_busy must be between 0 and 1"; do
  out=$("$kfused" --address=127.0.0.1:1 --store="$tmp/refused.db" "${bad%%|*}" --no_gpu 2>&1)
  rc=$?
  [[ $rc == 2 && $out == *"${bad#*|}"* && ! -e $tmp/refused.db && ! -e $tmp/refused.db.signing-key ]]
  check "kfused refuses ${bad%%|*} and leaves no files (exit 2)" $? "rc=$rc $out"
done
# Under --log_format=json every line is an event, kfused's and gRPC's own.
out=$(timeout 20 "$kfused" --address="$KFUSE_SERVER" --store="$tmp/second.db" --no_gpu --log_format=json 2>&1)
python3 -c 'import json, sys
events = [json.loads(l) for l in sys.argv[1].splitlines()]
assert any(e["event"] == "start_failed" and "cannot listen" in e["message"] for e in events), events' "$out"
check "--log_format=json: a refused start is JSON lines only" $? "$out"
# A start and a stop under JSON: every line an event, serving's facts as fields.
"$kfused" --address="unix:$tmp/json.sock" --store="$tmp/json.db" --no_gpu --log_format=json \
  2> "$tmp/json.log" &
jpid=$!
for _ in $(seq 50); do [[ -S $tmp/json.sock ]] && break; sleep 0.1; done
# A second kfused on that socket would unlink it and orphan the first.
out=$(timeout 10 "$kfused" --address="unix:$tmp/json.sock" --store="$tmp/json2.db" --no_gpu 2>&1)
rc=$?
[[ $rc == 1 && $out == *"a server answers on that socket (another kfused?)"* && ! -e $tmp/json2.db ]]
check "a second kfused on a served unix socket is refused (exit 1)" $? "rc=$rc $out"
kill -TERM $jpid; wait $jpid
python3 -c 'import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
first = [e for e in events if e["event"] == "serving"][0]
assert first["store"] == sys.argv[2] and first["read_only"] == "false" and "no_gpu_reason" in first, first
assert events[-1]["event"] == "stopped", events' "$tmp/json.log" "$tmp/json.db"
check "--log_format=json: serving carries its facts as fields, stopped comes last" $? "$(cat "$tmp/json.log")"

out=$("$kfuse" health 2>&1)
[[ $out == *SERVING* ]]
check "kfuse health prints SERVING" $? "$out"

out=$("$kfuse" version 2>&1)
[[ $out == *kfuse.v1* ]]
check "kfuse version names the API" $? "$out"

# First compile: a miss, writes the cubin and the plan.
out=$("$kfuse" compile examples/relu_fma_f32.json --cubin-dir "$tmp/cubins" \
  -o "$tmp/plan.pb" --plan-json "$tmp/plan.json" 2>&1)
rc=$?
check "compile relu_fma_f32 succeeds" $rc "$out"
[[ $out == *"cache"*"miss"* ]]
check "first compile is a miss" $? "$out"
[[ $out == *heuristic* ]]
check "no-GPU plan says heuristic" $? "$out"
key=$(awk '$1 == "key" { print $2; exit }' <<<"$out")
[[ -n $key ]]
check "summary prints the key" $? "$out"

cubins=("$tmp"/cubins/*.cubin)
[[ -f ${cubins[0]} ]]
check "cubin written to --cubin-dir" $? "$(ls -la "$tmp/cubins" 2>&1)"
magic=$(head -c 4 "${cubins[0]}" 2>/dev/null | od -An -tx1 | tr -d ' \n')
[[ $magic == 7f454c46 ]]
check "cubin starts with ELF magic" $? "magic=$magic"
[[ -s $tmp/plan.pb ]] && python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["kernels"]' "$tmp/plan.json"
check "plan written as binary and JSON" $? "$(cat "$tmp/plan.json" 2>&1 | head -20)"

out=$("$kfuse" compile examples/relu_fma_f32.json 2>&1)
[[ $out == *"cache"*"hit"* ]]
check "second compile is a hit" $? "$out"

out=$("$kfuse" --json compile examples/relu_fma_f32.json 2>&1)
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["cache"]=="CACHE_OUTCOME_HIT", r["cache"]; assert r["plan"]["key"]' "$out"
check "--json prints the CompileResponse" $? "$out"

for example in relu_fma_f32_symbolic gelu_bias_bf16 transcendental_10op_bf16 compile_request_sm90; do
  out=$("$kfuse" compile "examples/$example.json" 2>&1)
  check "compile $example succeeds" $? "$out"
done

# Matrix products: a linear layer is one matmul kernel with its epilogue, an
# MLP two, the softmax of a product a matmul kernel then a row kernel.
out=$("$kfuse" compile examples/linear_gelu_bf16.json 2>&1)
[[ $out == *"kernel 0  kf_mm_"* && $out == *"with its epilogue (add, gelu_tanh)"* ]]
check "linear_gelu_bf16 is one matmul kernel with its epilogue" $? "$out"
out=$("$kfuse" compile examples/mlp_bf16.json 2>&1)
[[ $out == *"plan     2 kernels"* && $out == *"is read by a later kernel"* ]]
check "mlp_bf16 is two matmul kernels" $? "$out"
out=$("$kfuse" compile examples/scores_softmax_bf16.json 2>&1)
[[ $out == *"kernel 0  kf_mm_"* && $out == *"kernel 1  kf_row_"* ]]
check "scores_softmax_bf16 is a matmul kernel, then a row kernel" $? "$out"
out=$("$kfuse" frob 2>&1)
rc=$?
[[ $rc == 2 && $out == *"kfuse: unknown command 'frob' (one of compile, tune, cache"* ]]
check "kfuse names an unknown command and lists the commands (exit 2)" $? "rc=$rc $out"
out=$("$kfuse" cache frob 2>&1)
rc=$?
[[ $rc == 2 && $out == *"kfuse cache: unknown command 'frob' (one of ls, show, rm"* ]]
check "kfuse cache names an unknown command and lists its commands (exit 2)" $? "rc=$rc $out"
out=$("$kfuse" chain softmax --width 64 --rows-symbol "" -o "$tmp/empty_symbol.json" 2>&1)
rc=$?
[[ $rc == 2 && $out == *"--rows-symbol: must name a symbol"* && ! -e $tmp/empty_symbol.json ]]
check "kfuse chain refuses an empty --rows-symbol (exit 2)" $? "rc=$rc $out"
out=$("$kfuse" compile --arch "" examples/relu_fma_f32.json 2>&1)
rc=$?
[[ $rc == 2 && $out == *"--arch: must name a target"* ]]
check "kfuse compile refuses an empty --arch (exit 2)" $? "rc=$rc $out"
# Other empty values and clamped numbers are refused the same way.
for bad in "compile examples/relu_fma_f32.json --policy ''|--policy: must name heuristic, quick or full" \
           "compile examples/relu_fma_f32.json -o ''|--out: must name a file" \
           "chain softmax --width 99999999999999999999 --rows 2|--width: expected a whole number (base 10) within int64" \
           "chain cross_entropy --width 8 --rows 2 --reduction ''|--reduction: must name none, sum or mean" \
           "chain softmax --width 8 --rows 2 --scale 1e-400|--scale: expected a finite number" \
           "--timeout inf device|--timeout: expected a finite number" \
           "chain softmax --width 0x10 --rows 2|--width: expected a whole number (base 10)" \
           "--verify-key '' device|--verify-key: must name a key"; do
  out=$(eval "\"\$kfuse\" ${bad%%|*}" 2>&1)
  rc=$?
  [[ $rc == 2 && $out == *"${bad#*|}"* ]]
  check "kfuse ${bad%%|*}: refused (exit 2)" $? "rc=$rc $out"
done
out=$("$kfuse" health --service kfuse.v1.Kernels 2>&1)
rc=$?
[[ $rc != 0 && $out == *"NOT_FOUND"*"kfuse.v1.KernelService and kfuse.v1.Tuning"* ]]
check "kfuse health names the services kfused reports" $? "rc=$rc $out"
# compile takes tune's --mode for --policy, and tune compile's --policy.
out=$("$kfuse" compile --mode quick examples/relu_fma_f32.json 2>&1)
rc=$?
[[ $rc == 0 && $out == *"state    heuristic"* ]]
check "kfuse compile --mode quick is --policy quick" $? "rc=$rc $out"
out=$("$kfuse" tune --policy bogus examples/relu_fma_f32.json 2>&1)
rc=$?
[[ $rc == 2 && $out == *"expected quick or full"* ]]
check "kfuse tune --policy is --mode" $? "rc=$rc $out"
out=$("$kfuse" chain softmax --width 0100 --rows 2 2>&1)
[[ $out == *'"size": "100"'* ]]
check "kfuse chain reads --width 0100 as 100, not octal" $? "$out"
out=$(timeout 60 "$kfuse" compile /dev/zero 2>&1)
rc=$?
[[ $rc == 2 && $out == *"/dev/zero: larger than 256 MiB"* ]]
check "kfuse compile /dev/zero is refused at the size cap (exit 2)" $? "rc=$rc $out"
# Attention, as the CLI's composite writes it: one kernel, the scores never
# stored; grouped heads with the log-sum-exp too.
out=$("$kfuse" chain attention --dtype bf16 --heads 4 --seq 256 --head-dim 64 --causal -o "$tmp/attn.json" 2>&1 &&
      "$kfuse" compile "$tmp/attn.json" 2>&1)
[[ $out == *"kernel 0  kf_attn_"* && $out != *"kernel 1"* && $out == *"the causal mask"* ]]
check "a causal attention from kfuse chain attention is one attention kernel" $? "$out"
out=$("$kfuse" compile examples/attention_gqa_bf16.json 2>&1)
[[ $out == *"kernel 0  kf_attn_"* && $out != *"kernel 1"* && $out == *"lse"* ]]
check "attention_gqa_bf16 (grouped heads, lse) is one attention kernel" $? "$out"
# Attention with k's heads not dividing q's, or another head dim: the
# product that reads them is named.
"$kfuse" chain attention --dtype bf16 --heads 8 --seq 128 --head-dim 64 -o "$tmp/attn_ok.json" >/dev/null
for bad in "1 6 heads" "3 48 dims"; do
  set -- $bad
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["inputs"][1]["shape"][int(sys.argv[2])]["size"] = sys.argv[3]
json.dump(d, open(sys.argv[4], "w"))' "$tmp/attn_ok.json" "$1" "$2" "$tmp/attn_bad.json"
  out=$("$kfuse" compile "$tmp/attn_bad.json" 2>&1)
  [[ $out == *"INVALID_ARGUMENT: op 1 (matmul): args[1]"* ]]
  check "attention with k's $3 mismatched is INVALID_ARGUMENT naming the product" $? "$out"
done
cat >"$tmp/bad_matmul.json" <<'JSON'
{"inputs": [{"name": "x", "dtype": "DTYPE_BF16", "shape": [{"size": "64"}, {"size": "128"}]},
            {"name": "w", "dtype": "DTYPE_BF16", "shape": [{"size": "96"}, {"size": "256"}]}],
 "ops": [{"kind": "OP_MATMUL", "args": [{"input": 0}, {"input": 1}]}],
 "outputs": [{"name": "y", "value": {"op": 0}}]}
JSON
out=$("$kfuse" compile "$tmp/bad_matmul.json" 2>&1)
rc=$?
[[ $rc -ne 0 && $out == *INVALID_ARGUMENT* && $out == *"op 0 (matmul)"* && $out == *"inner dims differ"* ]]
check "a matmul whose inner dims differ fails with INVALID_ARGUMENT naming op 0" $? "rc=$rc $out"

# The store survives a restart.
stop_server
check "SIGTERM stops kfused with exit code 0 (first run)" $? "$(tail -20 "$tmp/kfused.log")"
if start_server; then
  pass "kfused restarts on the same store"
  out=$("$kfuse" compile examples/relu_fma_f32.json 2>&1)
  [[ $out == *"cache"*"hit"* ]]
  check "compile after restart is a hit" $? "$out"
else
  fail "kfused restarts on the same store" "$(tail -20 "$tmp/kfused.log")"
fi

# Bad input: refused with the server's message naming the op.
out=$("$kfuse" compile examples/bad_broadcast.json 2>&1)
rc=$?
[[ $rc -ne 0 && $out == *INVALID_ARGUMENT* && $out == *"op 0"* ]]
check "bad_broadcast fails with INVALID_ARGUMENT naming op 0" $? "rc=$rc $out"

out=$("$kfuse" compile examples/no_such_file.json 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *no_such_file.json* ]]
check "missing chain file: usage error naming the file" $? "rc=$rc $out"

out=$("$kfuse" cache ls 2>&1)
[[ $out == *"${key:0:16}"* ]]
check "cache ls lists the entry" $? "$out"

out=$("$kfuse" cache ls --limit 1 2>&1)
[[ $out == *"the first 1 entry (more match"* ]]
check "cache ls --limit 1 says more entries match" $? "$out"
out=$("$kfuse" cache ls --prefix zz 2>&1)
[[ $out == *"no kernel key starts with zz"* ]]
check "cache ls --prefix with no match says so" $? "$out"

out=$("$kfuse" cache show "${key:0:12}" 2>&1)
[[ $out == *"$key"* ]]
check "cache show resolves a key prefix" $? "$out"

out=$("$kfuse" cache rm --all 2>&1)
check "cache rm --all" $? "$out"
out=$("$kfuse" cache ls 2>&1)
[[ $out == *"no kernels"* ]]
check "cache ls is empty after rm --all" $? "$out"

out=$("$kfuse" device 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"gpu"*"none: "* ]]
check "device says no GPU and why" $? "$out"

out=$("$kfuse" --server 127.0.0.1:1 --timeout 3 device 2>&1)
rc=$?
[[ $rc -eq 3 && $out == *UNAVAILABLE* ]]
check "unreachable server: exit 3 and UNAVAILABLE" $? "rc=$rc $out"

stop_server
rc=$?
check "SIGTERM stops kfused with exit code 0" $rc "rc=$rc $(tail -20 "$tmp/kfused.log")"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
