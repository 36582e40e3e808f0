#!/usr/bin/env bash
# End-to-end store administration between two nodes: two kfused (--no_gpu) on
# loopback with their own stores. A compiles a chain; `kfuse cache export`
# writes A's entries (signed by A) to a bundle; B refuses them until it is
# restarted with --trusted_keys naming A's public key, then serves the chain
# as a hit without compiling; `cache explain` on B names the key part that
# differs for another arch; a bundle with a broken signature is refused.
# Run by ctest as: bash cache_admin_test.sh BUILD_DIR. Ends "N passed, M failed".
set -u

build=${1:?usage: cache_admin_test.sh BUILD_DIR}
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
kfused=$build/service/kfused
kfuse=$build/clients/kfuse
for bin in "$kfused" "$kfuse"; do
  [[ -x $bin ]] || { echo "missing $bin: build targets kfused and kfuse first" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-admin.XXXXXX")
declare -A pid addr
unset KFUSE_SERVER KFUSE_TOKEN KFUSE_VERIFY_KEY KFUSE_TLS_CA KFUSE_TLS_CERT KFUSE_TLS_KEY

stop_node() {
  local p=${pid[$1]:-}
  if [[ -n $p ]] && kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  fi
  pid[$1]=""
}
cleanup() { stop_node a; stop_node b; rm -rf "$tmp"; }
trap cleanup EXIT

source "$(dirname "$0")/lib.sh"
# expect NAME PATTERN OUTPUT: OUTPUT matches the extended regex PATTERN.
expect() { if grep -Eq -- "$2" <<<"$3"; then pass "$1"; else fail "$1" "$3"; fi; }

# start_node NAME EXTRA_FLAGS...: kfused on its own store ($tmp/NAME.db) and
# a free port; waits for SERVING. Sets pid[NAME] and addr[NAME].
start_node() {
  local name=$1 attempt i port
  shift
  for attempt in 1 2 3; do
    port=$(free_port)
    addr[$name]=127.0.0.1:$port
    "$kfused" --address="${addr[$name]}" --store="$tmp/$name.db" --no_gpu --node="node-$name" "$@" \
      >>"$tmp/$name.log" 2>&1 &
    pid[$name]=$!
    for i in $(seq 1 100); do
      kill -0 "${pid[$name]}" 2>/dev/null || break
      if "$kfuse" --server "${addr[$name]}" --timeout 2 health >/dev/null 2>&1; then return 0; fi
      sleep 0.1
    done
    stop_node "$name"
  done
  echo "kfused $name did not start:" >&2
  cat "$tmp/$name.log" >&2
  return 1
}
on() { local name=$1; shift; "$kfuse" --server "${addr[$name]}" "$@"; }

cd "$src"

if ! start_node a || ! start_node b; then
  fail "both nodes start"
  echo "$passed passed, $failed failed"
  exit 1
fi
pass "both nodes start"

out=$(on a compile examples/relu_fma_f32.json 2>&1)
check "A compiles the chain" $? "$out"
key=$(awk '$1 == "key" { print $2; exit }' <<<"$out")
[[ ${#key} -eq 64 ]]
check "A's summary prints the key" $? "$out"

out=$(on a cache export --all -o "$tmp/a.kfb" 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"exported 2 entries (1 decision, 1 artifact)"* ]]
check "cache export writes A's decision and artifact" $? "rc=$rc $out"
[[ $(head -c 16 "$tmp/a.kfb" 2>/dev/null | od -An -c | tr -d ' \n') == 'KFUSE-BUNDLE-v1\n' ]]
check "the bundle starts with its magic" $? "$(head -c 32 "$tmp/a.kfb" | od -c | head -3)"

out=$(on a cache export "${key:0:12}" -o "$tmp/one.kfb" 2>&1)
[[ $out == *"exported 2 entries"* ]]
check "cache export KEY-PREFIX brings the decision along" $? "$out"
out=$(on a cache export zzzz -o "$tmp/none.kfb" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *NOT_FOUND*zzzz* && ! -e $tmp/none.kfb ]]
check "cache export of an unknown key is NOT_FOUND naming it, no file" $? "rc=$rc $out"

# B does not trust A yet.
out=$(on b cache import "$tmp/a.kfb" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *"rejected artifact ${key:0:16}: signed by "*"not a trusted key"* &&
  $out == *"imported 0, already present 0, rejected 2"* ]]
check "B rejects entries signed by an untrusted key, naming them (exit 1)" $? "rc=$rc $out"
out=$(on b cache ls 2>&1)
[[ $out == *"no kernels"* ]]
check "B's store is unchanged after the refused import" $? "$out"

"$kfused" --print_public_key --store="$tmp/a.db" >"$tmp/trusted" 2>"$tmp/print-key.log"
grep -Eq '^[0-9a-f]{64}$' "$tmp/trusted"
check "kfused --print_public_key prints A's key" $? "$(cat "$tmp/trusted" "$tmp/print-key.log")"

stop_node b
if ! start_node b --trusted_keys="$tmp/trusted"; then
  fail "B restarts with --trusted_keys"
  echo "$passed passed, $failed failed"
  exit 1
fi
pass "B restarts with --trusted_keys"

out=$(on b cache import "$tmp/a.kfb" 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"imported 2, already present 0, rejected 0"* ]]
check "B imports A's entries once it trusts A" $? "rc=$rc $out"
out=$(on b cache import "$tmp/a.kfb" 2>&1)
[[ $out == *"imported 0, already present 2, rejected 0"* ]]
check "a second import finds them already present" $? "$out"
# Through a pipe: the export's summary goes to stderr, so the bundle on
# stdout stays whole, and the import reads the pipe once.
out=$( (on a cache export --all -o /dev/stdout 2>"$tmp/export.err" | on b cache import /dev/stdin) 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"imported 0, already present 2, rejected 0"* ]] &&
  grep -q "exported 2 entries" "$tmp/export.err"
check "export to /dev/stdout piped into import of /dev/stdin" $? "rc=$rc $out $(cat "$tmp/export.err")"
# "-" is the same pair, and no file named "-" is left behind.
out=$( (cd "$tmp" && on a cache export --all -o - 2>"$tmp/export.err" | on b cache import -) 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"imported 0, already present 2, rejected 0"* && ! -e "$tmp/-" ]] &&
  grep -q "exported 2 entries" "$tmp/export.err"
check "export -o - piped into import -" $? "rc=$rc $out $(cat "$tmp/export.err")"
# Appended, as the shell's >> asks: what the file held stays.
printf 'before\n' >"$tmp/appended"
on a cache export --all -o - >>"$tmp/appended" 2>"$tmp/export.err"
[[ $(head -c 7 "$tmp/appended" | od -An -c | tr -d ' ') == 'before\n' && $(stat -c %s "$tmp/appended") -gt 100 ]] &&
  grep -q "to standard output" "$tmp/export.err"
check "export -o - >> FILE keeps what FILE held" $? "$(head -c 40 "$tmp/appended" | od -c | head -3) $(cat "$tmp/export.err")"
# In a group redirected once, what follows the bundle comes after it.
(on a cache export --all -o - 2>/dev/null; printf ZZZZ) >"$tmp/grouped"
[[ $(head -c 5 "$tmp/grouped") == KFUSE && $(tail -c 4 "$tmp/grouped") == ZZZZ ]]
check "export -o - in a redirected group writes where the shell's offset is" $? "$(head -c 20 "$tmp/grouped" | od -c | head -2)"

out=$(on b compile examples/relu_fma_f32.json 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"cache"*"hit"* && $out == *"$key"* ]]
check "B serves the chain as a hit under A's key" $? "rc=$rc $out"
# kfused logs one "build" event per compile: A has one, B none.
grep -Eq ' build ' "$tmp/a.log" && ! grep -Eq ' build ' "$tmp/b.log"
check "B compiled nothing (A's log has its build, B's none)" $? "$(grep ' build ' "$tmp/a.log" "$tmp/b.log")"
grep ' build ' "$tmp/a.log" | grep -q 'client=kfuse-cli/'
check "the build event names the client it was for" $? "$(grep ' build ' "$tmp/a.log")"

out=$(on b cache explain examples/relu_fma_f32.json 2>&1)
[[ $out == *"stored   yes"* ]]
check "cache explain on B: the chain is stored" $? "$out"
out=$(on b cache explain examples/relu_fma_f32.json --arch sm_80 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"stored   no"* ]] && grep -Eq '^\*  toolchain ' <<<"$out" && grep -Eq '^\*  device ' <<<"$out"
check "cache explain --arch sm_80 on B marks toolchain and device" $? "rc=$rc $out"
out=$(on b --json cache explain examples/relu_fma_f32.json --arch sm_80 2>&1)
python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert "toolchain" in r["differingParts"], r; assert r["fleet"]=="off"' "$out"
check "cache explain --json has the differing parts" $? "$out"

# A bundle whose last entry's signature (its last bytes) is broken.
python3 - "$tmp/a.kfb" "$tmp/forged.kfb" <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[-1] ^= 0x01
open(sys.argv[2], "wb").write(data)
EOF
out=$(on b cache import "$tmp/forged.kfb" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *"signature does not verify"* ]]
check "a bundle with a broken signature is rejected (exit 1)" $? "rc=$rc $out"

head -c 100 "$tmp/a.kfb" >"$tmp/short.kfb"
out=$(on b cache import "$tmp/short.kfb" 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *"short.kfb: entry 0 at offset 16"* ]]
check "a truncated bundle names the file and offset (exit 2)" $? "rc=$rc $out"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
