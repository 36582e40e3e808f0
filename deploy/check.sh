#!/usr/bin/env bash
# Checks the deployment files without a cluster or a container engine:
#   manifests   every deploy/k8s YAML parses, names apiVersion/kind/metadata.name,
#               references resolve, the SQL ConfigMap matches deploy/postgres
#   dockerfile  deploy/Dockerfile's stages, packages, user, ports, volume, entrypoint
#   scripts     bash -n (and shellcheck where installed)
#   unit        systemd-analyze verify deploy/kfused.service (ExecStart pointed at the build)
#   sql         fleet.sql and roles.sql applied twice to a throwaway PostgreSQL; the
#               writer may write, the reader may only read (needs root and a local server)
#   install-chroot  (--chroot) debootstraps Debian 12, runs install.sh in it, serves kfused
#               there as the kfuse user, checks health, compiles examples/, restarts
#               it and reads the store back; then a writer and a read-only node share
#               a throwaway fleet store (when kfused has --fleet_dsn); runs install.sh
#               again (minutes; root)
#
#   deploy/check.sh [--chroot] [--fresh] [--build DIR]
#     --build DIR  binaries from DIR (default build/)
#     --fresh      debootstrap again instead of reusing the cached Debian tree
# Work files live in build-deploy/ (git-ignored). Prints PASS/FAIL/SKIP per
# check and ends with "N passed, N failed, N skipped"; exit 1 when any failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

build=build
do_chroot=0
fresh=0
while (($#)); do
  case "$1" in
    --chroot) do_chroot=1; shift ;;
    --fresh) fresh=1; shift ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --build=*) build=${1#*=}; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" 2>/dev/null && pwd) || { echo "check.sh: no build folder $build" >&2; exit 2; }
work=$repo/build-deploy
mkdir -p "$work"

summary=()
passed=0 failed=0 skipped=0
SKIP=77
# run NAME FUNCTION: runs one check, records PASS / FAIL / SKIP (exit 77) with its time.
run() {
  local name=$1 t0=$SECONDS rc
  echo "== $name"
  "$2"
  rc=$?
  local took="$((SECONDS - t0))s"
  if ((rc == 0)); then
    passed=$((passed + 1)); summary+=("PASS  $name ($took)")
  elif ((rc == SKIP)); then
    skipped=$((skipped + 1)); summary+=("SKIP  $name: $skip_reason")
  else
    failed=$((failed + 1)); summary+=("FAIL  $name ($took)")
  fi
}
skip_reason=""
skip() { skip_reason=$1; echo "skipped: $1"; return $SKIP; }
is_root() { [ "$(id -u)" = 0 ]; }

python=python3
check_manifests() {
  if ! python3 -c 'import yaml' 2>/dev/null; then
    # PyYAML from PyPI into a venv of our own (Debian's python refuses pip installs).
    if [ ! -x "$work/venv/bin/python" ]; then
      python3 -m venv "$work/venv" && "$work/venv/bin/pip" install -q PyYAML || return 1
    fi
    python=$work/venv/bin/python
  fi
  "$python" deploy/check_manifests.py
}

check_dockerfile() {
  "$python" deploy/check_manifests.py --dockerfile || return 1
  if docker info >/dev/null 2>&1; then
    echo "  a container engine answers: build it with docker build -f deploy/Dockerfile ."
  else
    echo "  no container engine answers here (docker info fails): the image is not built"
  fi
}

check_scripts() {
  local ok=0 f
  for f in deploy/install.sh deploy/check.sh; do
    bash -n "$f" || ok=1
  done
  "$python" -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' deploy/check_manifests.py || ok=1
  if command -v shellcheck >/dev/null; then
    shellcheck -S warning deploy/install.sh deploy/check.sh || ok=1
  else
    echo "  shellcheck not installed: syntax checked with bash -n only"
  fi
  return $ok
}

check_unit() {
  command -v systemd-analyze >/dev/null || { skip "no systemd-analyze"; return; }
  [ -x "$build/service/kfused" ] || { echo "  $build/service/kfused is missing"; return 1; }
  # verify wants ExecStart's binary to exist: point it at the build's.
  local dir out
  dir=$(mktemp -d)
  sed "s|/usr/local/bin/kfused|$build/service/kfused|" deploy/kfused.service >"$dir/kfused.service"
  out=$(systemd-analyze verify "$dir/kfused.service" 2>&1)
  local rc=$?
  rm -rf "$dir"
  [ -z "$out" ] || echo "$out"
  ((rc == 0)) && [ -z "$out" ]
}

# --- a throwaway PostgreSQL server, run by nobody ----------------------------
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
pg_dir=""
have_pg() { [ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ]; }
# pg_start [PORT]: a fresh server with database kfuse, on a socket only, or also
# on 127.0.0.1:PORT; exports PGHOST, PGPORT, PGUSER, PGPASSWORD for its superuser.
pg_start() {
  pg_dir=$(mktemp -d /tmp/kfuse-pg.XXXXXX)
  chown nobody "$pg_dir"
  local admin listen="" port=${1:-5432}
  [ -z "${1:-}" ] || listen=127.0.0.1
  admin=$(openssl rand -hex 16)
  echo "$admin" >"$pg_dir/pw" && chown nobody "$pg_dir/pw"
  runuser -u nobody -- "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --auth=scram-sha-256 \
    --pwfile="$pg_dir/pw" >/dev/null || return 1
  runuser -u nobody -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
    -o "-c listen_addresses='$listen' -p $port -k $pg_dir" start >/dev/null || return 1
  export PGHOST=$pg_dir PGPORT=$port PGUSER=postgres PGPASSWORD=$admin PGOPTIONS='-c client_min_messages=warning'
  pg_psql -d postgres -c 'CREATE DATABASE kfuse'
}
pg_stop() {
  [ -n "$pg_dir" ] || return 0
  local -
  set +e
  runuser -u nobody -- "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast stop >/dev/null 2>&1
  rm -rf "$pg_dir"
  pg_dir=""
}
pg_psql() { "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
# Applies fleet.sql and roles.sql with fresh login passwords (exported).
pg_apply() {
  KFUSE_WRITER_PASSWORD=writer-$(openssl rand -hex 12)
  KFUSE_READER_PASSWORD=reader-$(openssl rand -hex 12)
  export KFUSE_WRITER_PASSWORD KFUSE_READER_PASSWORD
  pg_psql -d kfuse -f deploy/postgres/fleet.sql >/dev/null &&
    pg_psql -d kfuse -f deploy/postgres/roles.sql >/dev/null
}

# fleet.sql and roles.sql on a throwaway server: idempotent, and the roles can
# do what their nodes need and no more.
check_sql() {
  is_root || { skip "needs root (runs PostgreSQL as nobody)"; return; }
  have_pg || { skip "no PostgreSQL server installed"; return; }
  (
    set -e
    trap 'echo "  failed at line $LINENO: $BASH_COMMAND"' ERR
    trap pg_stop EXIT
    pg_start
    pg_apply
    pg_apply   # twice: both scripts are idempotent (and the second sets new passwords)
    echo "  fleet.sql and roles.sql applied twice"
    if KFUSE_READER_PASSWORD='' pg_psql -d kfuse -f deploy/postgres/roles.sql >/dev/null 2>&1; then
      echo "  roles.sql ran without a reader password"; exit 1
    fi
    echo "  roles.sql refuses to run without both passwords"
    as_role() { local user=$1 pw=$2; shift 2; PGUSER=$user PGPASSWORD=$pw pg_psql -d kfuse -At "$@"; }
    blob=6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d  # sha256 of one zero byte
    as_role kfuse_writer "$KFUSE_WRITER_PASSWORD" \
      -c "INSERT INTO kfuse_blobs VALUES ('$blob', 1, '\\x00')" \
      -c "INSERT INTO kfuse_leases VALUES ('k', 'node-a/1', now())" \
      -c "DELETE FROM kfuse_leases WHERE key = 'k'"
    echo "  kfuse_writer inserts blobs and takes leases"
    [ "$(as_role kfuse_reader "$KFUSE_READER_PASSWORD" -c 'SELECT count(*) FROM kfuse_blobs')" = 1 ]
    [ "$(as_role kfuse_reader "$KFUSE_READER_PASSWORD" -c 'SELECT schema_version FROM kfuse_fleet_meta')" = 2 ]
    echo "  kfuse_reader reads blobs and the schema version"
    if as_role kfuse_reader "$KFUSE_READER_PASSWORD" -c "INSERT INTO kfuse_leases VALUES ('k', 'r', now())" 2>/dev/null; then
      echo "  kfuse_reader could take a lease"; exit 1
    fi
    if as_role kfuse_writer "$KFUSE_WRITER_PASSWORD" -c "UPDATE kfuse_blobs SET bytes = 2" 2>/dev/null; then
      echo "  kfuse_writer could rewrite a blob"; exit 1
    fi
    if as_role kfuse_writer "$KFUSE_WRITER_PASSWORD" \
        -c "INSERT INTO kfuse_blobs VALUES ('$(printf '%064d' 0)', 1, '\\x00')" 2>/dev/null; then
      echo "  kfuse_writer filed a blob under another hash"; exit 1
    fi
    if as_role kfuse_writer wrong-password -c 'SELECT 1' 2>/dev/null; then
      echo "  a wrong password logged in"; exit 1
    fi
    echo "  kfuse_reader cannot write, kfuse_writer cannot rewrite or misfile a blob, a wrong password is refused"
  )
}

# --- the install check in a Debian 12 chroot ---------------------------------
root_dir=$work/bookworm-root
kfused_pid=""
cleanup_chroot() {
  local -
  set +e   # called from traps under set -e: every step must run
  if [ -n "$kfused_pid" ] && kill -0 "$kfused_pid" 2>/dev/null; then
    kill -TERM "$kfused_pid" 2>/dev/null
    wait "$kfused_pid" 2>/dev/null
  fi
  kfused_pid=""
  pg_stop
  # Anything else still running inside the tree was started by this check.
  local p left=0
  for p in /proc/[0-9]*; do
    if [ "$(readlink "$p/root" 2>/dev/null)" = "$root_dir" ]; then
      kill -TERM "${p#/proc/}" 2>/dev/null && left=1
    fi
  done
  ((left)) && sleep 2
  local m
  for m in dev proc; do
    if mountpoint -q "$root_dir/$m" 2>/dev/null; then
      umount "$root_dir/$m" 2>/dev/null || umount -l "$root_dir/$m"
    fi
  done
}

# The Debian mirror this machine's apt uses (deb822 or one-line sources).
apt_mirror() {
  local uri
  uri=$(grep -h -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
        grep -v -- '-security' | head -n1)
  [ -n "$uri" ] || uri=$(grep -h -E '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
                         awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' |
                         grep -v -- '-security' | head -n1)
  echo "${uri:-http://deb.debian.org/debian}"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

check_chroot() {
  is_root || { skip "needs root (debootstrap, chroot, mount)"; return; }
  [ -x "$build/service/kfused" ] && [ -x "$build/tuner/kfuse-worker" ] && [ -x "$build/clients/kfuse" ] ||
    { echo "  binaries missing in $build"; return 1; }
  [ -e /usr/local/cuda/lib64/libnvrtc.so.13 ] || { echo "  no NVRTC in /usr/local/cuda/lib64"; return 1; }
  if ! command -v debootstrap >/dev/null; then
    echo "  installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null || return 1
  fi
  trap cleanup_chroot EXIT
  trap 'exit 130' INT TERM
  (
    set -e
    trap 'echo "  failed at line $LINENO: $BASH_COMMAND"' ERR
    # This shell owns kfused: stop it and unmount however it leaves.
    trap cleanup_chroot EXIT
    cleanup_chroot
    # Never follow a mount out of the tree while removing it.
    rm -rf --one-file-system "$root_dir"
    tarball=$work/bookworm-minbase.tar
    mirror=$(apt_mirror)
    t0=$SECONDS
    if ((fresh)) || [ ! -s "$tarball" ]; then
      echo "  debootstrap --variant=minbase bookworm from $mirror"
      debootstrap --variant=minbase bookworm "$root_dir" "$mirror" >"$work/debootstrap.log" 2>&1 ||
        { tail -n 20 "$work/debootstrap.log"; exit 1; }
      tar -C "$root_dir" --numeric-owner -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
      echo "  debootstrap: $((SECONDS - t0))s (tree cached in $tarball)"
    else
      mkdir -p "$root_dir"
      tar -C "$root_dir" --numeric-owner -xf "$tarball"
      echo "  fresh Debian 12 tree from the cached $tarball: $((SECONDS - t0))s (--fresh to debootstrap again)"
    fi
    grep -q '^VERSION_ID="12"' "$root_dir/etc/os-release"
    # The same sources as this machine (updates and security included).
    if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
      rm -f "$root_dir/etc/apt/sources.list"
      cp /etc/apt/sources.list.d/*.sources "$root_dir/etc/apt/sources.list.d/"
    fi
    cp -L /etc/resolv.conf "$root_dir/etc/resolv.conf"
    mount -t proc proc "$root_dir/proc"
    mount --bind /dev "$root_dir/dev"

    t0=$SECONDS
    deploy/install.sh --root "$root_dir" --nvrtc-from /usr/local/cuda/lib64 "$build" 2>&1 | sed 's/^/  | /'
    echo "  install.sh: $((SECONDS - t0))s"
    [ "$(chroot "$root_dir" stat -c '%U:%G %a' /var/lib/kfuse)" = "kfuse:kfuse 750" ]
    echo "  /var/lib/kfuse is kfuse:kfuse 0750"
    [ -f "$root_dir/etc/systemd/system/kfused.service" ]
    chroot "$root_dir" getent passwd kfuse | grep -q ':/usr/sbin/nologin$'
    echo "  kfuse is a system user without a login shell; the unit is in /etc/systemd/system"

    uid=$(chroot "$root_dir" id -u kfuse)
    gid=$(chroot "$root_dir" id -g kfuse)
    as_kfuse() {
      chroot --userspec="$uid:$gid" --groups="$gid" "$root_dir" \
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/var/lib/kfuse "$@"
    }
    port=$(free_port)
    kfuse_at() { local p=$1; shift; as_kfuse kfuse --server="127.0.0.1:$p" --timeout=120 "$@"; }
    kfuse() { kfuse_at "$port" "$@"; }
    # start_kfused PORT [VAR=VALUE...] -- [FLAG...]: kfused --no_gpu as kfuse in
    # the tree, serving on 127.0.0.1:PORT; kfused_pid is its pid (chroot and env exec).
    start_kfused() {
      local p=$1 envs=()
      shift
      while [ "$1" != -- ]; do envs+=("$1"); shift; done
      shift
      chroot --userspec="$uid:$gid" --groups="$gid" "$root_dir" \
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/var/lib/kfuse "${envs[@]}" \
        kfused --no_gpu --address="127.0.0.1:$p" "$@" >>"$work/chroot-kfused.log" 2>&1 &
      kfused_pid=$!
      for _ in $(seq 1 60); do
        kfuse_at "$p" health >/dev/null 2>&1 && return 0
        kill -0 "$kfused_pid" 2>/dev/null || break
        sleep 0.5
      done
      echo "  kfused did not come up:"; tail -n 20 "$work/chroot-kfused.log"; return 1
    }
    stop_kfused() {
      local pid=${1:-$kfused_pid} t=$SECONDS
      kill -TERM "$pid"
      wait "$pid" || { echo "  kfused exited with an error"; return 1; }
      echo "  kfused stopped on SIGTERM in $((SECONDS - t))s"
    }
    : >"$work/chroot-kfused.log"
    start_kfused "$port" -- --store=/var/lib/kfuse/kfuse.db
    echo "  kfused (pid $kfused_pid) serves on 127.0.0.1:$port as uid $uid"
    [ "$(kfuse health)" = SERVING ]
    [ "$(kfuse health --service kfuse.v1.KernelService)" = "SERVING (kfuse.v1.KernelService)" ]
    tuning=$(kfuse health --service kfuse.v1.Tuning || true)
    [ "$tuning" = "NOT_SERVING (kfuse.v1.Tuning)" ]
    echo "  health: server SERVING, kfuse.v1.KernelService SERVING, kfuse.v1.Tuning NOT_SERVING (no GPU)"

    mkdir -p "$root_dir/tmp/kfuse-examples"
    cp examples/*.json "$root_dir/tmp/kfuse-examples/"
    chmod -R a+rX "$root_dir/tmp/kfuse-examples"
    n=0
    for f in "$root_dir"/tmp/kfuse-examples/*.json; do
      name=$(basename "$f")
      if [ "$name" = bad_broadcast.json ]; then
        out=$(kfuse compile "/tmp/kfuse-examples/$name" 2>&1) && { echo "  $name compiled"; exit 1; }
        grep -q INVALID_ARGUMENT <<<"$out"
        echo "  $name: INVALID_ARGUMENT, as it should"
        continue
      fi
      out=$(kfuse compile "/tmp/kfuse-examples/$name" 2>&1) || { echo "$out"; exit 1; }
      grep -q '^cache *miss' <<<"$out"
      echo "  compiled $name: $(grep -m1 '^kernel 0' <<<"$out" | tr -s ' ')"
      n=$((n + 1))
    done
    ((n >= 5))
    kfuse compile /tmp/kfuse-examples/relu_fma_f32.json | grep -q '^cache *hit'
    echo "  $n examples compiled by NVRTC inside the chroot; the second compile is a cache hit"

    stop_kfused
    start_kfused "$port" -- --store=/var/lib/kfuse/kfuse.db
    kfuse compile /tmp/kfuse-examples/relu_fma_f32.json | grep -q '^cache *hit'
    [ "$(kfuse cache ls | tail -n +2 | wc -l)" -ge "$n" ]
    echo "  after a restart the store in /var/lib/kfuse still answers: cache hit, $n+ entries listed"
    stop_kfused
    [ "$(chroot "$root_dir" stat -c '%U' /var/lib/kfuse/kfuse.db)" = kfuse ]
    [ "$(chroot "$root_dir" stat -c '%a' /var/lib/kfuse/kfuse.db.signing-key)" = 600 ]
    echo "  the store and its signing key (0600) belong to kfuse"

    # Two nodes sharing a fleet store, set up as deploy/README.md says: a
    # writer and a read-only node, passwords in /etc/kfuse/pgpass, the
    # writer's public key in the reader's trusted keys.
    help=$(as_kfuse kfused --helpfull 2>&1 || true)
    if ! grep -q -e '--fleet_dsn' <<<"$help" || ! grep -q -e '--metrics_address' <<<"$help"; then
      echo "  this kfused has no --fleet_dsn or --metrics_address: fleet leg not run"
    elif ! have_pg; then
      echo "  no PostgreSQL server here: fleet leg not run"
    else
      pg_start "$(free_port)"
      pg_apply
      printf '127.0.0.1:%s:kfuse:%s:%s\n' \
        "$PGPORT" kfuse_writer "$KFUSE_WRITER_PASSWORD" "$PGPORT" kfuse_reader "$KFUSE_READER_PASSWORD" \
        >"$root_dir/etc/kfuse/pgpass"
      chroot "$root_dir" chown kfuse:kfuse /etc/kfuse/pgpass
      chmod 0600 "$root_dir/etc/kfuse/pgpass"
      dsn="host=127.0.0.1 port=$PGPORT dbname=kfuse"
      wport=$(free_port) mport=$(free_port) rport=$(free_port)
      start_kfused "$wport" PGPASSFILE=/etc/kfuse/pgpass -- --store=/var/lib/kfuse/fleet-writer.db \
        --fleet_dsn="$dsn user=kfuse_writer" --metrics_address="127.0.0.1:$mport" --log_format=json
      writer_pid=$kfused_pid
      out=$(kfuse_at "$wport" compile /tmp/kfuse-examples/relu_fma_f32.json)
      key=$(awk '$1 == "key" {print $2; exit}' <<<"$out")
      [ "$(pg_psql -d kfuse -At -c "SELECT count(*) FROM kfuse_entries WHERE key = '$key'")" -ge 1 ]
      echo "  writer (kfuse_writer, PGPASSFILE) published ${key:0:16} to the fleet store"
      as_kfuse kfused --store=/var/lib/kfuse/fleet-writer.db --print_public_key >"$root_dir/etc/kfuse/trusted_keys"
      chmod 0644 "$root_dir/etc/kfuse/trusted_keys"
      start_kfused "$rport" PGPASSFILE=/etc/kfuse/pgpass -- --store=/var/lib/kfuse/fleet-reader.db \
        --fleet_dsn="$dsn user=kfuse_reader" --fleet_read_only --trusted_keys=/etc/kfuse/trusted_keys
      reader_pid=$kfused_pid
      kfuse_at "$rport" compile /tmp/kfuse-examples/relu_fma_f32.json | grep -q '^cache *fleet_hit'
      echo "  reader (kfuse_reader, --fleet_read_only, writer's key trusted): fleet_hit"
      out=$(kfuse_at "$rport" compile /tmp/kfuse-examples/softmax_bf16.json)
      key=$(awk '$1 == "key" {print $2; exit}' <<<"$out")
      [ "$(pg_psql -d kfuse -At -c "SELECT count(*) FROM kfuse_entries WHERE key = '$key'")" = 0 ]
      echo "  the reader's own compile stayed out of the fleet store"
      metrics=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
                "http://127.0.0.1:$mport/metrics")
      grep -q '^kfuse_fleet_up 1' <<<"$metrics"
      grep -q '"event":"fleet_up"' "$work/chroot-kfused.log"
      echo "  writer's /metrics says kfuse_fleet_up 1; its log is JSON"
      stop_kfused "$reader_pid"
      stop_kfused "$writer_pid"
      kfused_pid=""
      pg_stop
    fi

    t0=$SECONDS
    again=$(deploy/install.sh --root "$root_dir" --nvrtc-from /usr/local/cuda/lib64 "$build" 2>&1)
    grep -q 'runtime packages already installed' <<<"$again"
    if grep -q 'created system user' <<<"$again"; then echo "  a second user was made"; exit 1; fi
    [ "$(chroot "$root_dir" stat -c '%U:%G %a' /var/lib/kfuse)" = "kfuse:kfuse 750" ]
    echo "  install.sh again: nothing to install, no new user, same modes ($((SECONDS - t0))s)"
  )
  local rc=$?
  cleanup_chroot
  trap - EXIT INT TERM
  if mountpoint -q "$root_dir/proc" || mountpoint -q "$root_dir/dev"; then
    echo "  a mount is left in $root_dir"; rc=1
  fi
  return $rc
}

run manifests check_manifests
run dockerfile check_dockerfile
run scripts check_scripts
run unit check_unit
run sql check_sql
if ((do_chroot)); then
  run install-chroot check_chroot
else
  summary+=("SKIP  install-chroot: not asked for (deploy/check.sh --chroot)")
  skipped=$((skipped + 1))
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
