#!/usr/bin/env bash
# PostgreSQL 15 (Debian's postgresql-15) for logical-replication tests: a throwaway cluster of its
# own in $(run_dir postgres), run as the package's `postgres` system user, wal_level=logical,
# listening on 127.0.0.1:$PG_PORT only (unix socket inside the run dir), trust auth.
#
# Connection (what `env` prints): the superuser `postgres`, no password, database `postgres`:
#   TRIBUTARY_PG_DSN=postgres://postgres@127.0.0.1:<PG_PORT>/postgres?sslmode=disable
# A superuser is simplest for tests that create publications and slots; tests wanting a least-
# privilege role (REPLICATION + table ownership) create one themselves. A replication
# connection is the same DSN plus `replication=database`.
#
# The binaries are called by absolute path: /usr/local/bin/{pg_ctl,initdb,postgres} on the
# development image are only symlinks into /usr/lib/postgresql/15/bin, and a fresh machine has
# no such links (Debian keeps the server binaries off PATH).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TESTENV_NAME=postgres

PG_BIN=/usr/lib/postgresql/15/bin
PG_RUN=$(run_dir postgres)
PG_DATA=$PG_RUN/data
PG_LOG=$PG_RUN/server.log
PG_PIDFILE=$PG_RUN/postgres.pid

SERVER_RUN=$PG_RUN
SERVER_PIDFILE=$PG_PIDFILE
SERVER_PORTS=$PG_PORT
# pg_ctl's shutdown modes: fast (the default) disconnects clients, smart waits for them, immediate
# quits without a shutdown checkpoint (the next start runs crash recovery).
STOP_MODES="fast immediate smart"

# server_pids: the postmaster, matched by the `-D <data dir>` argument pg_ctl gives it (pg_ctl
# restart reuses it from postmaster.opts). Backends rename themselves, so only the postmaster
# matches; neither postmaster.pid nor our pid file is trusted, as a pg_ctl restart by hand or
# a reboot makes them stale.
server_pids() { procs_of postgres -D "$PG_DATA"; }

# cluster_pids prints the postmaster and every backend of our cluster, alive or orphaned by a
# killed postmaster: they all run in the data dir.
cluster_pids() {
  local p c
  for p in /proc/[0-9]*; do
    c=
    read -r c 2>/dev/null <"$p/comm" || continue
    [ "$c" = postgres ] && [ "$(readlink "$p/cwd" 2>/dev/null)" = "$PG_DATA" ] && proc_alive "${p#/proc/}" && echo "${p#/proc/}"
  done
  return 0
}

# do_stop MODE SECONDS PID sends the postmaster the signal of pg_ctl's MODE (what `pg_ctl -m MODE
# stop` does, to the pid in postmaster.pid, which may be stale). A mode that has not stopped it
# within SECONDS (smart waits for every client, fast for walsenders to be confirmed) is followed
# by an immediate shutdown, then by SIGKILL.
do_stop() {
  local mode=$1 secs=$2 pid=$3 sig
  case $mode in smart) sig=TERM ;; fast) sig=INT ;; immediate) sig=QUIT ;; *) die "unknown stop mode $mode" ;; esac
  kill -"$sig" "$pid" 2>/dev/null || true
  kill -CONT "$pid" 2>/dev/null || true
  wait_gone "$secs" "$pid" && return 0
  log "a $mode shutdown did not stop postmaster $pid within ${secs}s"
  if [ "$mode" != immediate ]; then
    # The postmaster SIGKILLs the backends that ignore the immediate shutdown.
    kill -QUIT "$pid" 2>/dev/null || true
    wait_gone 30 "$pid" && return "$STOP_FORCED"
  fi
  # shellcheck disable=SC2046 # one pid per word
  signal_stop KILL 30 $(cluster_pids) || return
  return "$STOP_FORCED"
}

# pg_clear_leftovers, with no postmaster on our data dir, waits for backends a killed postmaster
# left (they exit when they notice; one that does not would keep the shared memory a new
# postmaster refuses to start beside) and removes the lock files naming it: pid 1 reaps slowly
# here, and a postmaster takes a zombie for a running one.
pg_clear_leftovers() {
  local left
  left=$(cluster_pids)
  if [ -n "$left" ]; then
    log "waiting for backends left by a killed postmaster: ${left//$'\n'/ }"
    # shellcheck disable=SC2086 # one pid per word
    wait_gone 30 $left || signal_stop KILL 30 $left || die "backends of a killed postmaster survive"
  fi
  rm -f "$PG_DATA/postmaster.pid" "$PG_RUN/.s.PGSQL.$PG_PORT.lock" "$PG_RUN/.s.PGSQL.$PG_PORT"
}

# pg_fail prints the log, stops a postmaster this run started (so a later `up` does not reuse
# a half-configured cluster) and exits.
pg_fail() {
  show_logs "$PG_LOG"
  server_stop fast 30 || true
  die "$*"
}

pg_sql() { PGCONNECT_TIMEOUT=3 "$PG_BIN/psql" -XAtq -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c "$1"; }

# probe: a query over TCP, answered by the cluster on our data dir.
probe() { [ "$(pg_sql 'show data_directory' 2>/dev/null)" = "$PG_DATA" ]; }

setup_key() { echo "postgres port $PG_PORT"; }

# pg_launch starts the postmaster on the existing data dir and waits until it answers; after an
# immediate shutdown or a crash that includes crash recovery.
pg_launch() {
  pg_clear_leftovers
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 120 start >/dev/null ||
    pg_fail "pg_ctl start failed"
  wait_until 60 "postgres on 127.0.0.1:$PG_PORT" probe || pg_fail "postgres did not become ready"
}

do_start() { pg_launch; }

do_up() {
  no_autostart apt_ensure "$PG_BIN/initdb" postgresql-15
  id postgres >/dev/null 2>&1 || die "the postgresql-15 package did not create the postgres user"

  # Anything left from an earlier run of ours (alive but not answering) goes before the wipe.
  stop_leftover
  wait_until 20 "port $PG_PORT to be free" port_free "$PG_PORT" || die "127.0.0.1:$PG_PORT is taken by another process (set TRIBUTARY_PG_PORT)"

  rm -rf "$PG_RUN" && mkdir -p "$PG_RUN"
  chown postgres:postgres "$PG_RUN"
  # --auth=trust also writes the `host replication all 127.0.0.1/32 trust` line, so
  # replication connections over loopback need no pg_hba.conf edit.
  runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 \
    --locale=C.UTF-8 >"$PG_RUN/initdb.log" 2>&1 || { show_logs "$PG_RUN/initdb.log"; die "initdb failed"; }

  # synchronous_commit stays on: with it off, walsenders only see a commit once the WAL writer
  # flushed it (up to wal_writer_delay later), which makes decoded changes arrive late.
  # max_slot_wal_keep_size bounds the WAL that slots abandoned by killed tests can pin.
  cat >>"$PG_DATA/postgresql.conf" <<CONF

# --- tributary testenv ---
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_RUN'
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
max_slot_wal_keep_size = '1GB'
max_connections = 100
shared_buffers = '64MB'
fsync = off
full_page_writes = off
logging_collector = off
CONF

  pg_launch
  local wl
  wl=$(pg_sql 'show wal_level') || pg_fail "psql against the new cluster failed"
  [ "$wl" = logical ] || pg_fail "wal_level is '$wl', want logical"
}

describe() {
  local v
  v=$("$PG_BIN/postgres" -V 2>/dev/null | awk '{print $3}')
  echo "PostgreSQL $v pid ${SERVER_PID:-?} 127.0.0.1:$PG_PORT data $PG_DATA"
}

print_env() {
  echo "export TRIBUTARY_PG_DSN='postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable'"
}

main_dispatch "$@"
