#!/usr/bin/env bash
# How long a second node takes to serve a kernel another node built: two
# kfused nodes (--no_gpu unless GPU=1) share a throw-away PostgreSQL fleet
# store on loopback; kfuse-latency --mode fleet compiles a new chain on the
# first node, then times the second node's answer (which must be a
# FLEET_HIT: local miss, fleet read, signature check, copy into its store).
#
#   bash bench/fleet/latency.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
iterations=${2:-200}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-fleet-latency.XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash "$src/tests/pg/pg-ephemeral" stop "$tmp/pg"
  rm -rf "$tmp"
}
trap cleanup EXIT
port=$(bash "$src/tests/pg/pg-ephemeral" start "$tmp/pg")
dsn="host=127.0.0.1 port=$port dbname=kfuse user=kfuse_writer"
for n in a b; do "$build/service/kfused" --print_public_key --store="$tmp/$n.db" >>"$tmp/keys"; done
gpu_flag=--no_gpu
[[ ${GPU:-0} == 1 ]] && gpu_flag=
addr=()
for n in a b; do
  p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$build/service/kfused" --address="127.0.0.1:$p" --store="$tmp/$n.db" $gpu_flag --node="$n" \
    --fleet_dsn="$dsn" --trusted_keys="$tmp/keys" --log_format=json 2>"$tmp/$n.log" &
  pids+=($!)
  addr+=("127.0.0.1:$p")
  for i in $(seq 1 100); do
    "$build/clients/kfuse" --server "127.0.0.1:$p" --timeout 2 health >/dev/null 2>&1 && break
    sleep 0.1
  done
done
echo "# $(date -u +%FT%TZ) $(uname -n): fleet store PostgreSQL $(psql --version | awk '{print $3}') on loopback"
echo "# bash bench/fleet/latency.sh $* (GPU=${GPU:-0})"
"$build/bench/kfuse-latency" --server "${addr[0]}" --second_server "${addr[1]}" \
  --chain "$src/examples/transcendental_10op_bf16.json" --iterations "$iterations" --mode fleet
echo "builds on the second node: $(grep -c '"event":"build"' "$tmp/b.log" || true)"
