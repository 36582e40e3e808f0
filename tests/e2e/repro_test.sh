#!/usr/bin/env bash
# End-to-end: `kfuse repro` on repro bundles, without a GPU. A kfused
# (--no_gpu) serves the heuristic kernel of an example with its source; the
# bundles are made from that answer: one whose kernel.cu does not compile
# (it reproduces), the same fixed (it no longer does), a wrong result (the
# run step needs a GPU), and broken ones (usage errors). Run by ctest as:
# bash repro_test.sh BUILD_DIR (from the source root). Ends with
# "N passed, M failed"; exit 1 on failure.
set -u

build=${1:?usage: repro_test.sh BUILD_DIR}
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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-e2e-repro.XXXXXX")
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

# kfused on a fresh port, waiting (bounded) for SERVING; retries if the bind raced.
start_server() {
  local attempt i port
  for attempt in 1 2 3; do
    port=$(free_port)
    export KFUSE_SERVER=127.0.0.1:$port
    "$kfused" --address="$KFUSE_SERVER" --store="$tmp/kfuse.db" --no_gpu >>"$tmp/kfused.log" 2>&1 &
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
  return 1
}

cd "$src"

if ! start_server; then
  fail "kfused starts and reports SERVING" "$(tail -20 "$tmp/kfused.log")"
  echo "$passed passed, $failed failed"
  exit 1
fi
[[ $(cat "$tmp/kfused.log") == *"repro bundles in $tmp/kfuse.db.repro"* ]]
check "kfused keeps repro bundles beside its store by default" $? "$(cat "$tmp/kfused.log")"

out=$("$kfuse" compile examples/relu_fma_f32.json --source --cubin-dir "$tmp/kernels" \
  --plan-json "$tmp/plan.json" 2>&1)
check "compile relu_fma_f32 with its source" $? "$out"
[[ ! -d $tmp/kfuse.db.repro ]] || [[ -z $(ls -A "$tmp/kfuse.db.repro") ]]
check "a compile that succeeds leaves no bundle" $? "$(ls -la "$tmp/kfuse.db.repro" 2>&1)"
kill -TERM "$server_pid" && wait "$server_pid"
server_pid=""

# A bundle as kfused writes one (service/repro.h), from the served kernel.
# variant.txt is Variant::ToString: family{name=value,...}, names sorted.
read -r entry variant < <(python3 - "$tmp/plan.json" <<'EOF'
import json, sys
k = json.load(open(sys.argv[1]))["kernels"][0]
family = k["variant"]["family"].removeprefix("FAMILY_").lower()
params = ",".join(f"{n}={v}" for n, v in sorted(k["variant"]["params"].items()))
print(k["entry"], f"{family}{{{params}}}")
EOF
)
[[ -n ${entry:-} && -s $tmp/kernels/$entry.cu ]]
check "the plan names the kernel and its source" $? "entry=${entry:-} $(ls "$tmp/kernels")"

make_bundle() {  # make_bundle DIR KIND
  mkdir -p "$1"
  cp examples/relu_fma_f32.json "$1/chain.json"
  printf '%s\nfamily: pointwise\n' "$variant" >"$1/variant.txt"
  cp "$tmp/kernels/$entry.cu" "$1/kernel.cu"
  cat >"$1/info.json" <<EOF
{
  "kind": "$2",
  "message": "recorded by repro_test.sh",
  "variant": "$variant",
  "numerics": "fast",
  "entry": "$entry",
  "kernel_index": 0,
  "key": "0123456789abcdef",
  "versions": {"kfuse": "0.1.0", "generator": "pointwise/1", "nvrtc": "nvrtc-test"},
  "compile": {"arch": "sm_90", "options": []},
  "format": "kfuse.repro/1"
}
EOF
}

# A compile error: kernel.cu as recorded does not compile.
make_bundle "$tmp/broken" compile_error
printf '\nint repro_injected_error = ;\n' >>"$tmp/broken/kernel.cu"
out=$("$kfuse" repro "$tmp/broken" 2>&1)
rc=$?
[[ $rc -eq 1 && $out == *"reproduces: the kernel still fails to compile"* ]]
check "a compile error that still fails: exit 1, reproduces" $? "rc=$rc $out"
[[ $out == *FAILED* && $out == *repro_injected_error* ]]
check "the NVRTC log is printed" $? "$out"
[[ $out == *"DRIFT"* ]]
check "an edited kernel.cu shows as drift from this build's generator" $? "$out"

out=$("$kfuse" repro --regenerated "$tmp/broken" 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"this build's source: OK"* && $out == *"no longer reproduces"* ]]
check "--regenerated judges this build's source instead" $? "rc=$rc $out"

# Fixed: kernel.cu is what this build generates, and it compiles.
make_bundle "$tmp/fixed" compile_error
out=$("$kfuse" repro "$tmp/fixed" 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"no longer reproduces"* ]]
check "a compile error that compiles now: exit 0, no longer reproduces" $? "rc=$rc $out"
[[ $out == *"regenerated source matches kernel.cu"* ]]
check "kfused's source and this build's generator agree" $? "$out"

# A wrong result needs a GPU to replay; without one the compile step decides.
make_bundle "$tmp/wrong" wrong_result
out=$("$kfuse" repro "$tmp/wrong" 2>&1)
rc=$?
if [[ $out == *"skipped: no GPU here"* ]]; then
  [[ $rc -eq 0 ]]
  check "wrong_result without a GPU: compiled, run skipped, exit 0" $? "rc=$rc $out"
else
  [[ ($rc -eq 0 || $rc -eq 1) && $out == *"reproduces"* ]]
  check "wrong_result with a GPU: replayed against the fp64 reference" $? "rc=$rc $out"
fi

# Usage errors: exit 2 with a message naming what is wrong.
out=$("$kfuse" repro "$tmp/no_such_bundle" 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *no_such_bundle* ]]
check "missing bundle: exit 2 naming it" $? "rc=$rc $out"
out=$("$kfuse" repro 2>&1)
[[ $? -eq 2 ]]
check "no bundle argument: exit 2" $? "$out"
make_bundle "$tmp/bad" melted
out=$("$kfuse" repro "$tmp/bad" 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *"info.json: kind"* ]]
check "a bad kind: exit 2 naming info.json: kind" $? "rc=$rc $out"
make_bundle "$tmp/bad_arch" compile_error
sed -i 's/"arch": "sm_90"/"arch": "sm_7"/' "$tmp/bad_arch/info.json"
out=$("$kfuse" repro "$tmp/bad_arch" 2>&1)
rc=$?
[[ $rc -eq 2 && $out == *sm_7* ]]
check "an arch NVRTC cannot take: exit 2 naming it" $? "rc=$rc $out"

# A hostile bundle's text is printed escaped: no escape sequence reaches the
# terminal, and no line of it reads as a verdict.
make_bundle "$tmp/hostile" compile_error
python3 - "$tmp/hostile/info.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
info["key"] = "k\x1b[2Jcleared\nno longer reproduces: forged"
info["message"] = "line\n\x1b[31mred\x1b[0m \x1b]0;title\x07"
json.dump(info, open(sys.argv[1], "w"))
EOF
out=$("$kfuse" repro "$tmp/hostile" 2>&1)
rc=$?
[[ $rc -eq 0 && $out != *$'\x1b'* && $out != *$'\x07'* && $out == *'k\x1b[2Jcleared\nno longer'* ]]
check "a bundle's key and message are printed escaped" $? "rc=$rc $(printf '%q' "$out")"
[[ $(grep -c '^no longer reproduces' <<<"$out") -eq 1 ]]
check "a bundle's text forges no verdict line" $? "$out"
# The same through the arch NVRTC is given and a variant.txt that does not
# parse: both end in errors, printed escaped.
make_bundle "$tmp/hostile_arch" compile_error
python3 - "$tmp/hostile_arch/info.json" <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
info["compile"]["arch"] = "sm_90\x1b]0;pwned\x07\nno longer reproduces: forged"
json.dump(info, open(sys.argv[1], "w"))
EOF
make_bundle "$tmp/hostile_variant" compile_error
printf 'pointwise{a\033[31m=1}\n' >"$tmp/hostile_variant/variant.txt"
for bundle in hostile_arch hostile_variant; do
  out=$("$kfuse" repro "$tmp/$bundle" 2>&1)
  rc=$?
  [[ $rc -eq 2 && $out != *$'\x1b'* && $out != *$'\x07'* && $out == *'\x1b'* ]] &&
    ! grep -q '^no longer reproduces' <<<"$out"
  check "$bundle: refused (exit 2), its text escaped" $? "rc=$rc $(printf '%q' "$out")"
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
