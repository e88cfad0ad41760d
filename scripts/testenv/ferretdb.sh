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

SERVER_RUN=$FERRET_RUN
SERVER_PIDFILE=$FERRET_PID
SERVER_PORTS=$MONGO_PORT

# server_pids: the server (any build) on our data dir; also one whose run dir was deleted under it.
server_pids() { procs_of ferretdb-testenv -data-dir "$FERRET_RUN/data"; }

probe() {
  local bin
  bin=$(running_bin) && [ -x "$bin" ] && wire_ok "$bin"
}

setup_key() { echo "ferretdb $FERRET_ADDR"; }

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

do_up() {
  local bin t0
  t0=$(date +%s)
  apt_ensure setsid util-linux
  apt_ensure sha256sum coreutils
  bin=$(ferret_bin)

  # A stale instance (alive but not answering) would hold the port; stop it before wiping.
  stop_leftover
  wait_until 20 "port $MONGO_PORT to be free" port_free "$MONGO_PORT" || die "port $MONGO_PORT is taken by another process (set TRIBUTARY_MONGO_PORT)"
  rm -rf "$FERRET_RUN"
  FERRET_RUN=$(run_dir ferretdb)
  mkdir -p "$FERRET_RUN/data"
  ferret_launch "$bin"
  log "ready in $(($(date +%s) - t0))s"
}

# ferret_launch BIN starts the server on the data in run/ and waits until it answers hello.
ferret_launch() {
  local bin=$1
  printf '%s\n' "$bin" >"$FERRET_RUN/binary"
  # setsid detaches the server from the caller's process group and terminal.
  # FerretDB itself listens on a Unix socket; the binary's relay in front of it owns the TCP port
  # and runs writes one at a time (FerretDB's filtered updates are not atomic otherwise).
  (cd "$FERRET_RUN" && exec setsid "$bin" -listen-addr "$FERRET_ADDR" -data-dir "$FERRET_RUN/data" \
    -serialize-writes=true -socket "$FERRET_RUN/ferretdb.sock" >>"$FERRET_LOG" 2>&1 </dev/null) &
  FERRET_STARTED=$!
  echo "$FERRET_STARTED" >"$FERRET_PID"
  if ! wait_until 30 "FerretDB to answer hello on $FERRET_ADDR" ready_or_gone; then
    show_logs "$FERRET_LOG"
    server_stop graceful 5 || true
    die "FerretDB did not start"
  fi
  if ! proc_alive "$FERRET_STARTED" || ! wire_ok "$bin"; then show_logs "$FERRET_LOG"; die "FerretDB exited during start-up"; fi
}

ready_or_gone() { ! proc_alive "$FERRET_STARTED" || wire_ok "$(running_bin)"; }

# do_start builds the server first when its sources changed; the SQLite data stays.
do_start() {
  apt_ensure setsid util-linux
  apt_ensure sha256sum coreutils
  ferret_launch "$(ferret_bin)"
}

describe() {
  local bin
  bin=$(running_bin)
  printf 'FerretDB %s (embedded, SQLite), pid %s, %s, build %s\n' \
    "$("$bin" -version 2>/dev/null || echo '?')" "${SERVER_PID:-?}" "$FERRET_ADDR" \
    "$(basename "$(dirname "$(dirname "$bin")")")"
}

print_env() { echo "export TRIBUTARY_MONGO_URI=mongodb://$FERRET_ADDR/"; }

main_dispatch "$@"
