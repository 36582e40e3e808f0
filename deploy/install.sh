#!/usr/bin/env bash
# Installs kfused on a Debian 12 host from a build folder: the runtime
# packages (apt), the three binaries in /usr/local/bin, the kfuse system user,
# /var/lib/kfuse (0750), /etc/kfuse, /etc/default/kfused and the systemd unit.
# Idempotent: run it again after a rebuild to replace the binaries.
#
#   deploy/install.sh build                          # this host; enables the unit
#   deploy/install.sh --nvrtc-from /usr/local/cuda/lib64 build
#   deploy/install.sh --root /srv/chroot build      # into a chroot; no systemctl
#
# NVRTC (libnvrtc.so.13) is not a Debian package: kfused finds it in
# /usr/local/cuda/lib64 (its RUNPATH) where the CUDA 13 toolkit is installed;
# elsewhere --nvrtc-from DIR copies libnvrtc and libnvrtc-builtins from DIR
# into /usr/local/lib.
set -euo pipefail

# What the binaries link, as Debian 12 names them (ldd build/service/kfused);
# their own dependencies (libc-ares2, libre2-9, zlib1g) come with them.
RUNTIME_PKGS=(libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libsqlite3-0 libsodium23 libssl3
              libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libpq5)
BINARIES=(service/kfused tuner/kfuse-worker clients/kfuse)

usage() {
  cat >&2 <<'EOF'
usage: deploy/install.sh [--root DIR] [--nvrtc-from DIR] [--no-apt] BUILD_DIR
  --root DIR        install into the Debian 12 tree at DIR (a chroot); no systemctl calls
  --nvrtc-from DIR  copy libnvrtc.so.13* and libnvrtc-builtins.so.13* from DIR to /usr/local/lib
  --no-apt          do not install packages (they must be there already)
EOF
  exit 2
}

root=/
nvrtc_from=""
use_apt=1
build=""
while (($#)); do
  case "$1" in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --root=*) root=${1#*=}; shift ;;
    --nvrtc-from) nvrtc_from=${2:?--nvrtc-from needs a directory}; shift 2 ;;
    --nvrtc-from=*) nvrtc_from=${1#*=}; shift ;;
    --no-apt) use_apt=0; shift ;;
    -h | --help) usage ;;
    -*) echo "install.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$build" ] || usage; build=$1; shift ;;
  esac
done
[ -n "$build" ] || usage
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" && pwd)
root=$(cd "$root" && pwd)

log() { echo "install.sh: $*"; }
die() { echo "install.sh: $*" >&2; exit 1; }
# Runs a command on the target system: here, or chrooted into --root.
on_target() {
  if [ "$root" = / ]; then "$@"; else chroot "$root" "$@"; fi
}

[ "$(id -u)" = 0 ] || die "run as root (it installs packages, a user and a unit)"
for b in "${BINARIES[@]}"; do
  [ -x "$build/$b" ] || die "$build/$b is missing: build it first (scripts/setup)"
done
if [ "$root" != / ]; then
  [ -x "$root/usr/bin/apt-get" ] || die "$root does not look like a Debian tree (no usr/bin/apt-get)"
fi
if [ -r "$root/etc/os-release" ] && ! grep -q '^VERSION_ID="12"' "$root/etc/os-release"; then
  log "warning: $root is not Debian 12; package names may differ"
fi

# 1. Runtime packages (only what is missing, so a second run does nothing).
missing=()
for p in "${RUNTIME_PKGS[@]}"; do
  on_target dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  ((use_apt)) || die "missing packages: ${missing[*]} (and --no-apt given)"
  log "apt-get install ${missing[*]}"
  on_target env DEBIAN_FRONTEND=noninteractive apt-get update -q
  on_target env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "runtime packages already installed"
fi

# 2. NVRTC, when asked for.
if [ -n "$nvrtc_from" ]; then
  shopt -s nullglob
  libs=("$nvrtc_from"/libnvrtc.so.13* "$nvrtc_from"/libnvrtc-builtins.so.13*)
  shopt -u nullglob
  ((${#libs[@]})) || die "no libnvrtc.so.13* in $nvrtc_from"
  install -d -m 0755 "$root/usr/local/lib"
  cp -a "${libs[@]}" "$root/usr/local/lib/"
  on_target ldconfig
  log "NVRTC copied from $nvrtc_from to /usr/local/lib"
fi

# 3. Binaries, each replaced by a rename so a running kfused keeps its inode.
install -d -m 0755 "$root/usr/local/bin"
for b in "${BINARIES[@]}"; do
  name=$(basename "$b")
  install -m 0755 "$build/$b" "$root/usr/local/bin/.$name.new"
  mv -f "$root/usr/local/bin/.$name.new" "$root/usr/local/bin/$name"
done
log "binaries installed in /usr/local/bin"

# 4. The kfuse system user and its directories.
if ! on_target getent passwd kfuse >/dev/null; then
  on_target useradd --system --user-group --home-dir /var/lib/kfuse --no-create-home \
    --shell /usr/sbin/nologin --comment "kfuse kernel-fusion service" kfuse
  log "created system user kfuse"
fi
on_target install -d -o kfuse -g kfuse -m 0750 /var/lib/kfuse
on_target chown kfuse:kfuse /var/lib/kfuse
on_target chmod 0750 /var/lib/kfuse
# Keys, trusted keys, token and password files; readable by kfuse only.
on_target install -d -o root -g kfuse -m 0750 /etc/kfuse

# 5. The unit and its options file (an existing options file is kept).
install -d -m 0755 "$root/etc/systemd/system" "$root/etc/default"
install -m 0644 "$here/kfused.service" "$root/etc/systemd/system/kfused.service"
if [ ! -e "$root/etc/default/kfused" ]; then
  cat >"$root/etc/default/kfused" <<'EOF'
# Options for kfused.service. KFUSED_OPTS is split at spaces: give the fleet
# DSN in URI form. Secrets live in files under /etc/kfuse (mode 0600, owner
# kfuse), never here. deploy/README.md explains each flag.
#KFUSED_OPTS="--metrics_address=127.0.0.1:9420 --log_format=json"
# A tuning node sharing results through the fleet store:
#KFUSED_OPTS="--metrics_address=0.0.0.0:9420 --log_format=json --signing_key=/etc/kfuse/signing-key --trusted_keys=/etc/kfuse/trusted_keys --fleet_dsn=postgresql://kfuse_writer@fleet-db.example:5432/kfuse?sslmode=verify-full"
#PGPASSFILE=/etc/kfuse/pgpass
EOF
  chmod 0644 "$root/etc/default/kfused"
  log "wrote /etc/default/kfused"
fi

# 6. Every library the binaries need must now resolve on the target.
unresolved=$(on_target ldd /usr/local/bin/kfused /usr/local/bin/kfuse-worker /usr/local/bin/kfuse |
             grep 'not found' | sort -u || true)
if [ -n "$unresolved" ]; then
  echo "$unresolved" >&2
  case "$unresolved" in
    *libnvrtc*) die "NVRTC not found: install the CUDA 13 toolkit or pass --nvrtc-from DIR" ;;
    *) die "libraries above are missing on the target" ;;
  esac
fi

# 7. systemd, on a live host only.
if [ "$root" = / ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl enable kfused.service
  systemctl try-restart kfused.service
  log "unit enabled; start it with: systemctl start kfused (restarted if it was running)"
else
  log "unit installed in $root/etc/systemd/system (no systemctl calls)"
fi
log "done"
