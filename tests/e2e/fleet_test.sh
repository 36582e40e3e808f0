#!/usr/bin/env bash
# End-to-end: kfused nodes sharing one fleet store (a real PostgreSQL on
# loopback, tests/pg/pg-ephemeral), without a GPU (heuristic builds take the
# same fleet path as tuned ones). One node builds, another serves the same
# kernel without compiling; a node that does not trust the builder's key
# builds and publishes its own entry beside it; a reader-role node reads and
# never publishes; ten nodes asking for one new chain at once cause one
# build; the database killed and restarted under load costs no request.
# Run by ctest as: bash fleet_test.sh BUILD_DIR (from the source root). Ends
# with "N passed, M failed"; exit 1 on failure.
set -u

build=${1:?usage: fleet_test.sh BUILD_DIR}
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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-e2e-fleet.XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  bash "$src/tests/pg/pg-ephemeral" stop "$tmp/pg"
  # KFUSE_E2E_KEEP=DIR keeps the nodes' logs and the load reports there.
  [[ -n ${KFUSE_E2E_KEEP:-} ]] && mkdir -p "$KFUSE_E2E_KEEP" && cp "$tmp"/*.log "$tmp"/load.* "$KFUSE_E2E_KEEP"/ 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

source "$(dirname "$0")/lib.sh"

if ! pg_port=$(bash "$src/tests/pg/pg-ephemeral" start "$tmp/pg"); then
  fail "PostgreSQL starts on loopback" "$(cat "$tmp/pg/server.log" 2>/dev/null)"
  echo "$passed passed, $failed failed"
  exit 1
fi
writer="host=127.0.0.1 port=$pg_port dbname=kfuse user=kfuse_writer"
reader="host=127.0.0.1 port=$pg_port dbname=kfuse user=kfuse_reader"
psql_q() { psql -X -q -At -h 127.0.0.1 -p "$pg_port" -U postgres -d kfuse -c "$1"; }

# Every node's key, made before any node starts, so nodes can trust each other.
nodes=(a b c r n0 n1 n2 n3 n4 n5 n6 n7 n8 n9)
for n in "${nodes[@]}"; do
  "$kfused" --print_public_key --store="$tmp/$n.db" >>"$tmp/all.keys"
done
: >"$tmp/none.keys"

# start_node NAME ARGS...: kfused on a fresh port; sets port_NAME and mport_NAME.
start_node() {
  local name=$1 attempt i port mport pid
  shift
  for attempt in 1 2 3; do
    port=$(free_port)
    mport=$(free_port)
    "$kfused" --address="127.0.0.1:$port" --store="$tmp/$name.db" --no_gpu --node="$name" --log_format=json \
      --metrics_address="127.0.0.1:$mport" "$@" >>"$tmp/$name.log" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if "$kfuse" --server "127.0.0.1:$port" --timeout 2 health >/dev/null 2>&1; then
        pids+=("$pid")
        printf -v "port_$name" '%s' "$port"
        printf -v "mport_$name" '%s' "$mport"
        printf -v "pid_$name" '%s' "$pid"
        return 0
      fi
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  echo "kfused $name did not start: $(tail -5 "$tmp/$name.log")" >&2
  return 1
}
port_of() { local v="port_$1"; echo "${!v}"; }
metric() {  # metric NODE NAME{labels}: its value, or 0
  local v="mport_$1"
  curl -s "http://127.0.0.1:${!v}/metrics" | awk -v m="$2" 'index($0, m) == 1 { print $2; found = 1 } END { if (!found) print 0 }'
}
outcome() {  # outcome NODE CHAIN_FILE: the cache outcome of a Compile
  "$kfuse" --server "127.0.0.1:$(port_of "$1")" --timeout 60 --json compile "$2" 2>&1 |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("cache", "?"))' 2>/dev/null || echo error
}
builds() { grep -c '"event":"build"' "$tmp/$1.log"; }

# A chain of its own per test, so keys never collide between sections.
chain_with() {  # chain_with SCALE OUT: relu(x * SCALE) on 2^20 floats
  cat >"$2" <<EOF
{"inputs": [{"name": "x", "dtype": "DTYPE_F32", "shape": [{"size": "1048576"}]}],
 "ops": [{"kind": "OP_CONSTANT", "dtype": "DTYPE_F32", "value": $1},
         {"kind": "OP_MUL", "args": [{"input": 0}, {"op": 0}]},
         {"kind": "OP_RELU", "args": [{"op": 1}]}],
 "outputs": [{"name": "y", "value": {"op": 2}}]}
EOF
}

start_node a --fleet_dsn="$writer" --trusted_keys="$tmp/all.keys" || exit 1
start_node b --fleet_dsn="$writer" --trusted_keys="$tmp/all.keys" || exit 1
start_node c --fleet_dsn="$writer" --trusted_keys="$tmp/none.keys" || exit 1
start_node r --fleet_dsn="$reader" --fleet_read_only --trusted_keys="$tmp/all.keys" || exit 1

# --- one node builds, another serves it without compiling -------------------
chain_with 1.25 "$tmp/c1.json"
o=$(outcome a "$tmp/c1.json")
[[ $o == CACHE_OUTCOME_MISS ]]
check "node a builds a new chain (MISS)" $? "$o"
[[ $(psql_q "SELECT count(*) FROM kfuse_entries WHERE node = 'a' AND kind = 'artifact'") == 1 ]]
check "node a published the artifact, with its provenance" $? "$(psql_q 'SELECT kind, node, state FROM kfuse_entries')"
o=$(outcome b "$tmp/c1.json")
[[ $o == CACHE_OUTCOME_FLEET_HIT ]]
check "node b serves it from the fleet (FLEET_HIT)" $? "$o"
[[ $(builds b) == 0 ]]
check "node b compiled nothing" $? "$(cat "$tmp/b.log")"
o=$(outcome b "$tmp/c1.json")
[[ $o == CACHE_OUTCOME_HIT ]]
check "node b copied it into its own store (then HIT)" $? "$o"
[[ $(metric b 'kfuse_lookups_total{result="hit",tier="fleet"}') == 1 ]]
check "node b counts one fleet hit" $? "$(curl -s "http://127.0.0.1:$mport_b/metrics" | grep lookups)"

# --- a node that does not trust the builder builds and publishes its own ----
o=$(outcome c "$tmp/c1.json")
[[ $o == CACHE_OUTCOME_MISS && $(builds c) == 1 ]]
check "node c (trusts nobody else) builds it itself" $? "$o $(tail -3 "$tmp/c.log")"
a_key="SELECT key FROM kfuse_entries WHERE node = 'a' AND kind = 'artifact' LIMIT 1"
[[ $(psql_q "SELECT count(DISTINCT signer) FROM kfuse_entries WHERE kind = 'artifact' AND key = ($a_key)") == 2 ]]
check "node c published its own entry beside a's under the key" $? "$(psql_q 'SELECT kind, node, state FROM kfuse_entries')"
[[ $(metric c 'kfuse_verification_failures_total{what="fleet_signature"}') == 0 ]]
check "node c never fetched the entry it does not trust" $? "$(grep -i verif "$tmp/c.log")"

# --- a reader-role node reads, never publishes -----------------------------
o=$(outcome r "$tmp/c1.json")
[[ $o == CACHE_OUTCOME_FLEET_HIT ]]
check "reader node r serves the fleet entry" $? "$o"
before=$(psql_q "SELECT count(*) FROM kfuse_entries")
chain_with 1.375 "$tmp/c2.json"
o=$(outcome r "$tmp/c2.json")
[[ $o == CACHE_OUTCOME_MISS && $(psql_q "SELECT count(*) FROM kfuse_entries") == "$before" ]]
check "reader node r builds a new chain locally and publishes nothing" $? "$o"
grep -q '"fleet_mode":"read-only"' "$tmp/r.log"
check "reader node r says it is a read-only fleet node" $? "$(grep fleet_mode "$tmp/r.log")"

# --- a --read_only node with a writer's login publishes nothing, and says so
start_node w --trusted_keys="$tmp/all.keys" || exit 1  # Makes its store.
kill -TERM "$pid_w" && wait "$pid_w" 2>/dev/null
start_node w --fleet_dsn="$writer" --read_only --trusted_keys="$tmp/all.keys" || exit 1
grep -q '"fleet_mode":"read-only"' "$tmp/w.log"
check "a --read_only node with a writer login says read-only" $? "$(grep fleet_mode "$tmp/w.log")"

# --- ten nodes, one new chain, one build -----------------------------------
for i in 0 1 2 3 4 5 6 7 8 9; do
  start_node "n$i" --fleet_dsn="$writer" --trusted_keys="$tmp/all.keys" || exit 1
done
chain_with 1.625 "$tmp/c3.json"
asks=()
for i in 0 1 2 3 4 5 6 7 8 9; do
  outcome "n$i" "$tmp/c3.json" >"$tmp/out.n$i" &
  asks+=($!)
done
wait "${asks[@]}"
total=0
hits=0
for i in 0 1 2 3 4 5 6 7 8 9; do
  total=$((total + $(builds "n$i")))
  [[ $(cat "$tmp/out.n$i") == CACHE_OUTCOME_FLEET_HIT ]] && hits=$((hits + 1))
done
[[ $total == 1 ]]
check "ten nodes asked at once for one new chain: exactly one build ($total)" $? "$(cat "$tmp"/out.n*)"
[[ $hits == 9 ]]
check "the nine others served the builder's entry ($hits FLEET_HIT)" $? "$(cat "$tmp"/out.n*)"
[[ $(psql_q "SELECT count(*) FROM kfuse_leases") == 0 ]]
check "the lease was given back" $? "$(psql_q 'SELECT * FROM kfuse_leases')"

# --- the database killed and restarted under load ---------------------------
"$load" --server "127.0.0.1:$port_a" --clients 16 --clients_per_channel 8 --duration 8 --hit_fraction 0.9 \
  --miss_fraction 0.1 --hit_chains 4 --deadline 30 >"$tmp/load.a" 2>&1 &
load_a=$!
"$load" --server "127.0.0.1:$port_b" --clients 16 --clients_per_channel 8 --duration 8 --hit_fraction 0.9 \
  --miss_fraction 0.1 --hit_chains 4 --deadline 30 >"$tmp/load.b" 2>&1 &
load_b=$!
sleep 2.5
bash "$src/tests/pg/pg-ephemeral" kill "$tmp/pg"
sleep 3
bash "$src/tests/pg/pg-ephemeral" restart "$tmp/pg"
wait "$load_a"
rc_a=$?
wait "$load_b"
rc_b=$?
[[ $rc_a == 0 && $rc_b == 0 ]] && ! grep -q "RESOURCE_EXHAUSTED\|UNAVAILABLE\|INTERNAL" "$tmp/load.a" "$tmp/load.b"
check "database killed and restarted under load on two nodes: zero failed requests" $? \
  "$(cat "$tmp/load.a" "$tmp/load.b")"
grep -q '"event":"fleet_unavailable"' "$tmp/a.log"
check "node a warned that the fleet was away" $? "$(grep fleet "$tmp/a.log" | tail -5)"
for i in $(seq 1 80); do
  [[ $(metric a 'kfuse_fleet_up') == 1 && $(metric b 'kfuse_fleet_up') == 1 ]] && break
  sleep 0.5
done
[[ $(metric a 'kfuse_fleet_up') == 1 && $(metric b 'kfuse_fleet_up') == 1 ]]
check "nodes a and b see the database back by themselves (kfuse_fleet_up 1)" $? "$(grep fleet "$tmp/a.log" | tail -5)"
chain_with 1.875 "$tmp/c4.json"
o=$(outcome a "$tmp/c4.json")
o2=$(outcome b "$tmp/c4.json")
[[ $o == CACHE_OUTCOME_MISS && $o2 == CACHE_OUTCOME_FLEET_HIT ]]
check "after the restart a builds, b serves it from the fleet again" $? "$o $o2"

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
