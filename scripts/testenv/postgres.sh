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

# pg_stop stops our cluster: through pg_ctl while its data dir exists, then by signal whatever
# postmaster still runs on our data dir (INT = fast shutdown; TERM would wait for clients).
pg_stop() {
  local pid tmp=$PG_RUN/.orphan.pid
  if [ -f "$PG_DATA/postmaster.pid" ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >/dev/null 2>&1 || true
  fi
  # Matched by the `-D <data dir>` argument pg_ctl gives the postmaster, not by the pid file,
  # whose pid may belong to another process after a reboot.
  for pid in $(pids_with_arg "$PG_DATA"); do
    proc_alive "$pid" || continue
    log "stopping postmaster $pid on $PG_DATA by signal"
    kill -INT "$pid" 2>/dev/null || true
    echo "$pid" >"$tmp" && stop_pid "$tmp" 30
  done
  rm -f "$PG_PIDFILE"
}

# pg_fail prints the log, stops a postmaster this run started (so a later `up` does not reuse
# a half-configured cluster) and exits.
pg_fail() {
  show_logs "$PG_RUN/initdb.log" "$PG_LOG"
  pg_stop
  die "$*"
}

pg_ready() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -d postgres -U postgres -t 2; }

do_up() {
  no_autostart apt_ensure "$PG_BIN/initdb" postgresql-15
  id postgres >/dev/null 2>&1 || die "the postgresql-15 package did not create the postgres user"

  # Anything left from an earlier run of ours (alive but not answering) goes before the wipe.
  pg_stop
  wait_until 20 "port $PG_PORT to be free" port_free "$PG_PORT" || die "127.0.0.1:$PG_PORT is taken by another process (set TRIBUTARY_PG_PORT)"

  rm -rf "$PG_RUN" && mkdir -p "$PG_RUN"
  chown postgres:postgres "$PG_RUN"
  # --auth=trust also writes the `host replication all 127.0.0.1/32 trust` line, so
  # replication connections over loopback need no pg_hba.conf edit.
  runuser -u postgres -- "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 \
    --locale=C.UTF-8 >"$PG_RUN/initdb.log" 2>&1 || pg_fail "initdb failed"

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

  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 start >/dev/null ||
    pg_fail "pg_ctl start failed"
  head -n 1 "$PG_DATA/postmaster.pid" >"$PG_PIDFILE"
  wait_until 60 "postgres on 127.0.0.1:$PG_PORT" pg_ready || pg_fail "postgres did not become ready"
  local wl
  wl=$("$PG_BIN/psql" -XAtq -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -c 'show wal_level') ||
    pg_fail "psql against the new cluster failed"
  [ "$wl" = logical ] || pg_fail "wal_level is '$wl', want logical"
}

do_down() { pg_stop; }

is_running() { pid_alive "$PG_PIDFILE" && pg_ready; }

describe() {
  local v
  v=$("$PG_BIN/postgres" -V 2>/dev/null | awk '{print $3}')
  echo "PostgreSQL $v pid $(cat "$PG_PIDFILE" 2>/dev/null) 127.0.0.1:$PG_PORT data $PG_DATA"
}

print_env() {
  echo "export TRIBUTARY_PG_DSN='postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable'"
}

main_dispatch "$@"
