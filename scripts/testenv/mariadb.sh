#!/usr/bin/env bash
# MariaDB 10.11 (Debian's mariadb-server) with a ROW-format binlog for CDC tests: its own datadir
# in $(run_dir mariadb), listening on 127.0.0.1:$MYSQL_PORT only, started as root and dropping to
# the package's `mysql` user. Debian's default instance (/var/lib/mysql, port 3306) is never
# started: the install runs under a policy-rc.d that forbids it.
#
# Connection (what `env` prints), in go-sql-driver/mysql DSN form:
#   TRIBUTARY_MYSQL_DSN=tributary:tributary@tcp(127.0.0.1:<MYSQL_PORT>)/test
# User `tributary` (password `tributary`) has ALL PRIVILEGES ON *.* WITH GRANT OPTION, which
# includes REPLICATION SLAVE (binlog dumps) and BINLOG MONITOR (SHOW BINLOG STATUS); tests that
# want a least-privilege CDC user create one with it. Database `test` exists and is empty.
# root@localhost has an empty password and is reachable over the unix socket in the run dir
# (`mariadb --defaults-file=$(run_dir mariadb)/my.cnf -uroot`).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
TESTENV_NAME=mariadb

MY_RUN=$(run_dir mariadb)
MY_CNF=$MY_RUN/my.cnf
MY_PIDFILE=$MY_RUN/mariadb.pid
MY_ERRLOG=$MY_RUN/error.log
MY_USER=tributary
MY_PASS=tributary

SERVER_RUN=$MY_RUN
SERVER_PIDFILE=$MY_PIDFILE
SERVER_PORTS=$MYSQL_PORT

# server_pids: mariadbd on our config file (graceful = SIGTERM, its clean shutdown).
server_pids() { procs_of mariadbd "--defaults-file=$MY_CNF"; }

# my_fail prints the logs, stops what this run started (so a later `up` does not reuse a
# half-configured server) and exits.
my_fail() {
  show_logs "$MY_RUN/install.log" "$MY_ERRLOG" "$MY_RUN/stdout.log"
  server_stop graceful 60 || true
  die "$*"
}

# my_root_ready succeeds once root can run a statement over the socket (bootstrap is over).
my_root_ready() { mariadb --defaults-file="$MY_CNF" -uroot -Nse 'SELECT 1'; }
my_ready_or_dead() { my_root_ready || ! proc_alive "$MY_STARTED"; }

my_sql() {
  mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$MYSQL_PORT" -u"$MY_USER" -p"$MY_PASS" \
    --connect-timeout=3 -Nse "$1"
}

# probe: a query over TCP as the test user, answered by the server on our datadir.
probe() { [ "$(my_sql 'SELECT @@datadir' 2>/dev/null)" = "$MY_RUN/data/" ]; }

setup_key() { echo "mariadb port $MYSQL_PORT"; }

# my_launch starts mariadbd on the existing datadir and waits until root can run a statement over
# the socket; it stops waiting early when the server died during start-up.
my_launch() {
  nohup /usr/sbin/mariadbd --defaults-file="$MY_CNF" >>"$MY_RUN/stdout.log" 2>&1 &
  MY_STARTED=$!
  wait_until 120 "mariadb on 127.0.0.1:$MYSQL_PORT" my_ready_or_dead || my_fail "mariadb did not become ready"
  proc_alive "$MY_STARTED" || my_fail "mariadbd exited during start-up"
}

do_start() {
  my_launch
  wait_until 30 "the TCP listener" probe || my_fail "no answer on 127.0.0.1:$MYSQL_PORT"
}

do_up() {
  no_autostart apt_ensure /usr/sbin/mariadbd mariadb-server mariadb-client
  # Should a policy have let the package start Debian's default instance, stop it: it would
  # hold port 3306 and memory for nothing.
  if pid_alive /run/mysqld/mysqld.pid; then
    log "stopping the Debian default instance the package started"
    stop_pid /run/mysqld/mysqld.pid 30
  fi
  id mysql >/dev/null 2>&1 || die "the mariadb-server package did not create the mysql user"

  stop_leftover
  wait_until 20 "port $MYSQL_PORT to be free" port_free "$MYSQL_PORT" || die "127.0.0.1:$MYSQL_PORT is taken by another process (set TRIBUTARY_MYSQL_PORT)"

  rm -rf "$MY_RUN" && mkdir -p "$MY_RUN/data" "$MY_RUN/tmp"
  # Only this file is read (--defaults-file), not Debian's /etc/mysql tree, so everything the
  # tests rely on is spelled out here, including utf8mb4 (the compiled-in default is latin1).
  cat >"$MY_CNF" <<CNF
[mariadbd]
user=mysql
datadir=$MY_RUN/data
tmpdir=$MY_RUN/tmp
socket=$MY_RUN/mariadb.sock
pid-file=$MY_PIDFILE
log_error=$MY_ERRLOG
port=$MYSQL_PORT
bind-address=127.0.0.1
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
server_id=1
log_bin=mariadb-bin
binlog_format=ROW
binlog_row_image=FULL
binlog_row_metadata=FULL
binlog_expire_logs_seconds=86400
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
sync_binlog=0
performance_schema=OFF

[client]
socket=$MY_RUN/mariadb.sock
port=$MYSQL_PORT
CNF
  chown -R mysql:mysql "$MY_RUN"

  # --defaults-file must come first for both programs.
  mariadb-install-db --defaults-file="$MY_CNF" --auth-root-authentication-method=normal \
    --skip-test-db >"$MY_RUN/install.log" 2>&1 || my_fail "mariadb-install-db failed"

  my_launch
  mariadb --defaults-file="$MY_CNF" -uroot <<SQL || my_fail "creating the test user failed"
CREATE USER IF NOT EXISTS '$MY_USER'@'%' IDENTIFIED BY '$MY_PASS';
GRANT ALL PRIVILEGES ON *.* TO '$MY_USER'@'%' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS test;
SQL
  wait_until 30 "the TCP listener" probe || my_fail "no answer on 127.0.0.1:$MYSQL_PORT"
  local vars
  vars=$(my_sql 'SELECT CONCAT_WS(" ", @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata)') ||
    my_fail "querying the server variables failed"
  [ "$vars" = "ON ROW FULL FULL" ] || my_fail "unexpected binlog settings: $vars (log_bin format row_image row_metadata)"
}

describe() {
  local v
  v=$(/usr/sbin/mariadbd --version 2>/dev/null | awk '{print $3}')
  echo "MariaDB $v pid ${SERVER_PID:-?} 127.0.0.1:$MYSQL_PORT data $MY_RUN/data"
}

print_env() {
  echo "export TRIBUTARY_MYSQL_DSN='$MY_USER:$MY_PASS@tcp(127.0.0.1:$MYSQL_PORT)/test'"
}

main_dispatch "$@"
