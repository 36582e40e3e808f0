#!/usr/bin/env bash
# End-to-end security: kfused with TLS, mutual TLS, tokens and signed plans on
# loopback (--no_gpu), checked with the `kfuse` CLI; then --read_only. A
# throwaway CA, server and client certificates are made with openssl.
# Run by ctest as: bash security_test.sh BUILD_DIR. Ends "N passed, M failed".
set -u

build=${1:?usage: security_test.sh BUILD_DIR}
build=$(cd "$build" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
kfused=$build/service/kfused
kfuse=$build/clients/kfuse
for bin in "$kfused" "$kfuse"; do
  [[ -x $bin ]] || { echo "missing $bin: build targets kfused and kfuse first" >&2; exit 1; }
done
command -v openssl >/dev/null || { echo "openssl is needed" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-sec.XXXXXX")
store=$tmp/kfuse.db
server_pid=""
unset KFUSE_TOKEN KFUSE_VERIFY_KEY KFUSE_TLS_CA KFUSE_TLS_CERT KFUSE_TLS_KEY

stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  server_pid=""
}
cleanup() { stop_server; rm -rf "$tmp"; }
trap cleanup EXIT

source "$(dirname "$0")/lib.sh"
# expect NAME PATTERN OUTPUT: OUTPUT matches the extended regex PATTERN.
expect() { if grep -Eq -- "$2" <<<"$3"; then pass "$1"; else fail "$1" "$3"; fi; }


# --- A throwaway PKI.
pki=$tmp/pki
mkdir -p "$pki"
(
  cd "$pki" || exit 1
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj "/CN=kfuse test CA"
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 -extfile server.ext
  openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj "/CN=kfuse test client"
  openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1
  # A client certificate from another CA: must be refused.
  openssl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.pem -days 1 -subj "/CN=rogue"
) >"$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log"; echo "0 passed, 1 failed"; exit 1; }

token=sec-e2e-token-$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
printf '# e2e\n%s\n' "$token" >"$tmp/tokens"
chmod 600 "$tmp/tokens"
printf '%s\n' "$token" >"$tmp/token"
printf 'wrong-token-0123456789abcdef\n' >"$tmp/wrong-token"

mtls=(--tls-ca "$pki/ca.pem" --tls-cert "$pki/client.pem" --tls-key "$pki/client.key")

# TLS files that are no PEM are refused naming the flag, before a store is
# made: /dev/zero (which never ends), a directory, an empty client CA; so
# are a key that is not the certificate's, a key file holding a certificate
# and a certificate file holding a key.
for bad in "--tls_cert=/dev/zero|--tls_cert /dev/zero is larger than 1 MiB" \
           "--tls_cert=$tmp|--tls_cert $tmp is a directory" \
           "--tls_client_ca=/dev/null|--tls_client_ca /dev/null holds no PEM block" \
           "--tls_key=$pki/client.key|--tls_key is not the key of the first certificate in --tls_cert" \
           "--tls_key=$pki/ca.pem|--tls_key holds no private key" \
           "--tls_cert=$pki/server.key|--tls_cert holds no certificate"; do
  flags=(--tls_cert="$pki/server.pem" --tls_key="$pki/server.key" "${bad%%|*}")
  out=$(timeout 10 "$kfused" --address=127.0.0.1:1 --store="$tmp/refused.db" --no_gpu "${flags[@]}" 2>&1)
  rc=$?
  [[ $rc == 1 && $out == *"${bad#*|}"* && ! -e $tmp/refused.db ]]
  check "kfused refuses ${bad%%|*} before making a store" $? "rc=$rc $out"
done

# start_server EXTRA_FLAGS...: kfused with TLS + mTLS + tokens, waits for SERVING.
start_server() {
  local attempt i port
  for attempt in 1 2 3; do
    port=$(free_port)
    export KFUSE_SERVER=127.0.0.1:$port
    "$kfused" --address="$KFUSE_SERVER" --store="$store" --no_gpu \
      --tls_cert="$pki/server.pem" --tls_key="$pki/server.key" --tls_client_ca="$pki/ca.pem" \
      --auth_tokens_file="$tmp/tokens" "$@" >>"$tmp/kfused.log" 2>&1 &
    server_pid=$!
    for i in $(seq 1 100); do
      kill -0 "$server_pid" 2>/dev/null || break
      if "$kfuse" --timeout 2 "${mtls[@]}" health >/dev/null 2>&1; then return 0; fi
      sleep 0.1
    done
    stop_server
  done
  echo "kfused did not start:" >&2
  cat "$tmp/kfused.log" >&2
  return 1
}

# --- Refusals before serving.
out=$("$kfused" --address=0.0.0.0:0 --store="$store" --no_gpu 2>&1)
expect "plaintext on a non-loopback address is refused" "refusing to listen on 0.0.0.0:0 without TLS" "$out"
pubkey=$("$kfused" --store="$store" --print_public_key 2>"$tmp/print-key.err")
expect "--print_public_key prints 64 hex digits" '^[0-9a-f]{64}$' "$pubkey"
expect "--print_public_key says it created the key" "created a new signing key $store.signing-key" \
  "$(cat "$tmp/print-key.err")"
mode=$(stat -c %a "$store.signing-key" 2>&1)
expect "the generated signing key is mode 600" '^600$' "$mode"
pubkey2=$("$kfused" --store="$store" --print_public_key 2>&1)
if [[ $pubkey2 == "$pubkey" ]]; then pass "the key is generated once, and then not reported as created"
else fail "the key is generated once, and then not reported as created" "$pubkey2"; fi

start_server || { echo "0 passed, 1 failed"; exit 1; }
expect "start-up log names the transport and key, never the token" "mutual TLS, 1 accepted token.*$pubkey" \
  "$(cat "$tmp/kfused.log")"
if grep -q "$token" "$tmp/kfused.log"; then fail "token not logged" "$(cat "$tmp/kfused.log")"; else pass "token not logged"; fi

chain=$src/examples/relu_fma_f32.json
out=$("$kfuse" --timeout 5 --token-file "$tmp/token" compile "$chain" 2>&1)
expect "plaintext client fails against TLS" "UNAVAILABLE|DEADLINE" "$out"
out=$("$kfuse" --timeout 5 --tls-ca "$pki/ca.pem" --token-file "$tmp/token" compile "$chain" 2>&1)
expect "TLS without a client certificate fails" "UNAVAILABLE|DEADLINE" "$out"
out=$("$kfuse" --timeout 5 --tls-ca "$pki/ca.pem" --tls-cert "$pki/rogue.pem" --tls-key "$pki/rogue.key" \
  --token-file "$tmp/token" compile "$chain" 2>&1)
expect "a client certificate from another CA fails" "UNAVAILABLE|DEADLINE" "$out"
out=$("$kfuse" --timeout 5 "${mtls[@]}" compile "$chain" 2>&1)
expect "mTLS without a token is UNAUTHENTICATED" "UNAUTHENTICATED" "$out"
out=$("$kfuse" --timeout 5 "${mtls[@]}" --token-file "$tmp/wrong-token" device 2>&1)
expect "a wrong token is UNAUTHENTICATED" "UNAUTHENTICATED" "$out"
out=$("$kfuse" --timeout 5 "${mtls[@]}" health 2>&1)
expect "health needs no token" "SERVING" "$out"

out=$("$kfuse" --timeout 20 "${mtls[@]}" --token-file "$tmp/token" compile "$chain" \
  --verify-key "$pubkey" --cubin-dir "$tmp/cubins" 2>&1)
expect "mTLS + token: compile works and verifies with the printed key" "wrote .*\.cubin" "$out"
out=$(KFUSE_TOKEN=$token "$kfuse" --timeout 20 "${mtls[@]}" compile "$chain" --verify-key "$pubkey" 2>&1)
expect "KFUSE_TOKEN is accepted; a hit verifies too" "cache +hit" "$out"
printf '%s\n' "$pubkey" >"$tmp/server.pub"
out=$("$kfuse" --timeout 20 "${mtls[@]}" --token-file "$tmp/token" compile "$chain" --verify-key "$tmp/server.pub" 2>&1)
expect "the pinned key may be a file" "cache +hit" "$out"
wrong=$(printf '%064d' 0 | tr 0 a)
rm -rf "$tmp/wrong-cubins"
out=$("$kfuse" --timeout 20 "${mtls[@]}" --token-file "$tmp/token" compile "$chain" --verify-key "$wrong" \
  --cubin-dir "$tmp/wrong-cubins" 2>&1)
expect "a wrong pinned key is refused" "PERMISSION_DENIED.*does not verify against the pinned key" "$out"
if compgen -G "$tmp/wrong-cubins/*.cubin" >/dev/null; then fail "no cubin written for an unverified plan"; else
  pass "no cubin written for an unverified plan"; fi

# --- Read-only: the stored chain is served, a new one is refused.
stop_server
start_server --read_only || { echo "$passed passed, $((failed + 1)) failed"; exit 1; }
out=$("$kfuse" --timeout 20 "${mtls[@]}" --token-file "$tmp/token" compile "$chain" --verify-key "$pubkey" 2>&1)
expect "read-only: a stored chain is served (signed)" "cache +hit" "$out"
out=$("$kfuse" --timeout 20 "${mtls[@]}" --token-file "$tmp/token" compile "$src/examples/gelu_bias_bf16.json" 2>&1)
expect "read-only: a new chain is FAILED_PRECONDITION" "FAILED_PRECONDITION" "$out"
stop_server

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
