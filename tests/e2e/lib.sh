# Helpers shared by the end-to-end scripts (sourced, not a test itself):
# PASS/FAIL bookkeeping that ends in the "N passed, N failed" line, and a
# free loopback port.
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1"
  [[ -n ${2:-} ]] && sed 's/^/    | /' <<<"$2"
  return 0
}
# check NAME CONDITION-EXIT-CODE OUTPUT
check() { if [[ $2 -eq 0 ]]; then pass "$1"; else fail "$1" "${3:-}"; fi; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
