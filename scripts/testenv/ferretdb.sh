#!/usr/bin/env bash
# MongoDB wire protocol test server: FerretDB embedded as a library (tools/ferretdb, its own Go
# module) with the SQLite backend. No download besides Go modules; the binary is built once per
# distinct source tree and cached under dist/.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TESTENV_NAME=ferretdb

FERRET_SRC=$TESTENV_REPO/tools/ferretdb
FERRET_RUN=$TESTENV_HOME/run/ferretdb
FERRET_PID=$FERRET_RUN/ferretdb.pid
FERRET_LOG=$FERRET_RUN/ferretdb.log
FERRET_ADDR=127.0.0.1:$MONGO_PORT
# -buildvcs=false: VCS stamping needs git and a trusted checkout, and adds nothing here.
FERRET_BUILD_FLAGS=(-buildvcs=false)

# go_cmd prints the go command to use; Debian bookworm's golang is far too old for FerretDB
# (go 1.24) and this module (go 1.26), so only an already installed toolchain is accepted.
go_cmd() {
  local g
  for g in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go; do
    [ -n "$g" ] && [ -x "$g" ] && { printf '%s\n' "$g"; return 0; }
  done
  die "no Go toolchain on PATH (need Go >= 1.26; Debian's golang package is too old)"
}

# build_key hashes everything that determines the binary: the module files, every Go source, the
# build flags and the toolchain version. A changed key means a rebuild into a new dist directory.
build_key() {
  local go=$1 f
  {
    for f in "$FERRET_SRC"/go.mod "$FERRET_SRC"/go.sum "$FERRET_SRC"/*.go; do
      printf '== %s\n' "${f##*/}"
      cat "$f"
    done
    printf '== flags %s\n' "${FERRET_BUILD_FLAGS[*]}"
    "$go" env GOVERSION
  } | sha256sum | cut -c1-16
}

# ferret_bin builds the server when no cached build matches the sources and prints its path.
ferret_bin() {
  local go key dir tmp
  go=$(go_cmd)
  [ -f "$FERRET_SRC/go.mod" ] || die "missing $FERRET_SRC/go.mod"
  key=$(build_key "$go")
  dir=$(dist_dir "ferretdb-$key")
  if [ ! -x "$dir/bin/ferretdb-testenv" ]; then
    log "building tools/ferretdb with $("$go" env GOVERSION) into $dir (first build takes about a minute)"
    tmp=$(mktemp -d "$TESTENV_HOME/dist/.ferretdb-build.XXXXXX")
    # GOWORK=off: a workspace file in the checkout must not pull this module in or out.
    if ! (cd "$FERRET_SRC" && GOWORK=off GOFLAGS=-mod=readonly "$go" build "${FERRET_BUILD_FLAGS[@]}" \
      -o "$tmp/bin/ferretdb-testenv" .) >&2; then
      rm -rf "$tmp"
      die "go build of tools/ferretdb failed"
    fi
    # Older builds are never used again; keep only the one being installed.
    find "$TESTENV_HOME/dist" -maxdepth 1 -name 'ferretdb-*' ! -name "ferretdb-$key" -exec rm -rf {} + 2>/dev/null || true
    chmod 755 "$tmp"
    rm -rf "$dir"
    mv -T "$tmp" "$dir"
  fi
  printf '%s\n' "$dir/bin/ferretdb-testenv"
}

# running_bin prints the binary the current instance was started from.
running_bin() { cat "$FERRET_RUN/binary" 2>/dev/null; }

# wire_ok BIN sends `hello` over the wire protocol and needs a reply with ok: 1.
wire_ok() { "$1" -check -timeout 3s -listen-addr "$FERRET_ADDR" >/dev/null 2>&1; }

ready() { pid_alive "$FERRET_PID" && wire_ok "$1"; }

# orphan_pids prints instances of this server (built under this TESTENV_HOME, serving our address)
# that lost their pid file, e.g. because the runtime directory was deleted under them.
orphan_pids() {
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $exe in "$TESTENV_HOME"/dist/ferretdb-*/bin/ferretdb-testenv*) ;; *) continue ;; esac
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "-listen-addr $FERRET_ADDR " || continue
    printf '%s\n' "${p#/proc/}"
  done
}

do_up() {
  local bin t0
  t0=$(date +%s)
  apt_ensure setsid util-linux
  apt_ensure sha256sum coreutils
  bin=$(ferret_bin)

  # A stale instance (alive but not answering) would hold the port; stop it before wiping.
  stop_pid "$FERRET_PID" 10
  local orphan
  for orphan in $(orphan_pids); do
    log "stopping orphaned instance pid $orphan"
    echo "$orphan" >"$TESTENV_HOME/.ferretdb-orphan.pid"
    stop_pid "$TESTENV_HOME/.ferretdb-orphan.pid" 10
  done
  wait_until 20 "port $MONGO_PORT to be free" port_free "$MONGO_PORT" || die "port $MONGO_PORT is taken by another process (set TRIBUTARY_MONGO_PORT)"
  rm -rf "$FERRET_RUN"
  FERRET_RUN=$(run_dir ferretdb)
  mkdir -p "$FERRET_RUN/data"
  printf '%s\n' "$bin" >"$FERRET_RUN/binary"

  # setsid detaches the server from the caller's process group and terminal.
  # FerretDB itself listens on a Unix socket; the binary's relay in front of it owns the TCP port
  # and runs writes one at a time (FerretDB's filtered updates are not atomic otherwise).
  (cd "$FERRET_RUN" && exec setsid "$bin" -listen-addr "$FERRET_ADDR" -data-dir "$FERRET_RUN/data" \
    -serialize-writes=true -socket "$FERRET_RUN/ferretdb.sock" >"$FERRET_LOG" 2>&1 </dev/null) &
  echo $! >"$FERRET_PID"

  if ! wait_until 30 "FerretDB to answer hello on $FERRET_ADDR" ready "$bin"; then
    show_logs "$FERRET_LOG"
    stop_pid "$FERRET_PID" 5
    die "FerretDB did not start"
  fi
  log "ready in $(($(date +%s) - t0))s"
}

do_down() { stop_pid "$FERRET_PID" 30; }

is_running() {
  local bin
  bin=$(running_bin) || return 1
  [ -x "$bin" ] && ready "$bin"
}

describe() {
  local bin
  bin=$(running_bin)
  printf 'FerretDB %s (embedded, SQLite), pid %s, %s, build %s\n' \
    "$("$bin" -version 2>/dev/null || echo '?')" "$(cat "$FERRET_PID" 2>/dev/null)" "$FERRET_ADDR" \
    "$(basename "$(dirname "$(dirname "$bin")")")"
}

print_env() { echo "export TRIBUTARY_MONGO_URI=mongodb://$FERRET_ADDR/"; }

main_dispatch "$@"
