# shellcheck shell=bash
# Shared helpers for the per-server scripts in this directory. Sourced, never run.
#
# Layout (TRIBUTARY_TESTENV_HOME, default /var/tmp/tributary-testenv; outside /root so the
# unprivileged service user can traverse it, and outside the checkout so downloads and unpacked
# distributions survive fresh clones):
#   dl/<server>/        downloaded archives (Maven artifacts also stay in ~/.m2)
#   dist/<server>-<v>/  unpacked distributions, reused between runs
#   run/<server>/       data, config, logs and the pid file of one instance. Only `up` of a
#                       stopped server wipes it (a fresh instance); stop, start and restart keep
#                       it, and so does down. .testenv-setup in it records the settings (ports,
#                       version) of an up that finished; start needs the same ones.
#   logs/<server>-<command>.log  the output of the last `testenv <command>` of that server
#
# Which server runs is read from /proc, never from a pid file: a server is the process of its
# command name whose arguments (Elasticsearch: environment) name this instance (procs_of), and it
# runs when it also answers a probe that proves the answer is its own. A pid file made stale by a restart with the server's
# own tools (pg_ctl restart) or by a kill is rewritten or removed by the next look.
set -euo pipefail

TESTENV_DEFAULT_HOME=/var/tmp/tributary-testenv
TESTENV_HOME=${TRIBUTARY_TESTENV_HOME:-$TESTENV_DEFAULT_HOME}
TESTENV_HOME=${TESTENV_HOME%/}
TESTENV_SVC_USER=${TRIBUTARY_TESTENV_USER:-tributary}
TESTENV_JDK=${TRIBUTARY_TESTENV_JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
TESTENV_MDP=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
TESTENV_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TESTENV_REPO=$(cd "$TESTENV_SCRIPTS/../.." && pwd)

# Loopback ports; every one can be overridden from the environment. All lie below Linux's
# ephemeral range (ip_local_port_range, 32768-60999 by default): a client that connects to a
# stopped server's port in that range can be given that very port as its own source port and
# connect to itself, and the restarted server then cannot bind ("Address already in use": seen in
# TestFaultPostgresOutage, whose load reconnects hundreds of times during the outage).
ES_HTTP_PORT=${TRIBUTARY_ES_PORT:-19200}
ES_TRANSPORT_PORT=${TRIBUTARY_ES_TRANSPORT_PORT:-19300}
OS_HTTP_PORT=${TRIBUTARY_OPENSEARCH_PORT:-19201}
OS_TRANSPORT_PORT=${TRIBUTARY_OPENSEARCH_TRANSPORT_PORT:-19301}
KAFKA_PORT=${TRIBUTARY_KAFKA_PORT:-19092}
KAFKA_CONTROLLER_PORT=${TRIBUTARY_KAFKA_CONTROLLER_PORT:-19093}
PG_PORT=${TRIBUTARY_PG_PORT:-15432}
MYSQL_PORT=${TRIBUTARY_MYSQL_PORT:-13306}
MONGO_PORT=${TRIBUTARY_MONGO_PORT:-17017}
CONNECT_PORT=${TRIBUTARY_CONNECT_PORT:-18083}
ES_SECURE_HTTP_PORT=${TRIBUTARY_ES_SECURE_PORT:-19210}
ES_SECURE_TRANSPORT_PORT=${TRIBUTARY_ES_SECURE_TRANSPORT_PORT:-19310}
OS_SECURE_HTTP_PORT=${TRIBUTARY_OPENSEARCH_SECURE_PORT:-19211}
OS_SECURE_TRANSPORT_PORT=${TRIBUTARY_OPENSEARCH_SECURE_TRANSPORT_PORT:-19311}
# The three nodes of escluster: node N listens on http BASE+N and transport BASE+N.
ESC_HTTP_BASE=${TRIBUTARY_ES_CLUSTER_HTTP_BASE:-19230}
ESC_TRANSPORT_BASE=${TRIBUTARY_ES_CLUSTER_TRANSPORT_BASE:-19330}

log() { printf '%s %s\n' "[testenv ${TESTENV_NAME:-}]" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# run_dir NAME prints (and creates) the runtime directory of one server.
run_dir() { mkdir -p "$TESTENV_HOME/run/$1" && printf '%s\n' "$TESTENV_HOME/run/$1"; }
dist_dir() { mkdir -p "$TESTENV_HOME/dist" && printf '%s\n' "$TESTENV_HOME/dist/$1"; }
dl_dir() { mkdir -p "$TESTENV_HOME/dl/$1" && printf '%s\n' "$TESTENV_HOME/dl/$1"; }

# ensure_svc_user creates the unprivileged system user that runs servers refusing root.
# Scripts run in parallel, so creation is serialized with a lock and a lost race is not an error.
ensure_svc_user() {
  id "$TESTENV_SVC_USER" >/dev/null 2>&1 && return 0
  mkdir -p "$TESTENV_HOME"
  (
    flock 9
    id "$TESTENV_SVC_USER" >/dev/null 2>&1 ||
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$TESTENV_SVC_USER"
  ) 9>"$TESTENV_HOME/.user.lock"
}

# apt_ensure CMD PKG... installs Debian packages when CMD is not on PATH (apt-get update at most once).
# Parallel scripts take turns through a lock, since dpkg allows one installer at a time.
apt_ensure() {
  local cmd=$1; shift
  command -v "$cmd" >/dev/null 2>&1 && return 0
  mkdir -p "$TESTENV_HOME"
  (
    flock -w 900 9 || die "waited 15 minutes for another package installation"
    command -v "$cmd" >/dev/null 2>&1 && exit 0
    if [ ! -f "$TESTENV_HOME/.apt-updated" ]; then
      apt-get update -qq >&2 && touch "$TESTENV_HOME/.apt-updated"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
  ) 9>"$TESTENV_HOME/.apt.lock"
}

# mvn_fetch GROUP:ARTIFACT:VERSION[:PACKAGING[:CLASSIFIER]] DIR copies one artifact (no transitive
# dependencies) from Maven Central through ~/.m2 into DIR.
mvn_fetch() {
  mkdir -p "$2"
  mvn_locked -q "$TESTENV_MDP:copy" -Dartifact="$1" -DoutputDirectory="$2" -Dmdep.overWriteIfNewer=true >&2
}

# mvn_locked ARGS... runs Maven in batch mode, one at a time: Maven 3.8 does not lock ~/.m2, and
# parallel first downloads of the same plugin could read each other's half-written files.
mvn_locked() {
  mkdir -p "$TESTENV_HOME"
  (
    flock -w 1800 9 || die "waited 30 minutes for another Maven run"
    mvn -B -Dstyle.color=never "$@"
  ) 9>"$TESTENV_HOME/.mvn.lock"
}

# proc_alive PID succeeds when PID is a live process. A zombie does not count: PID 1 on our
# machines reaps exited servers only after a second or two.
proc_alive() {
  local state
  kill -0 "$1" 2>/dev/null || return 1
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# pid_alive PIDFILE succeeds when the file names a live process.
pid_alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && proc_alive "$pid"
}

# stop_pid PIDFILE [SECONDS] sends TERM, waits (default 30 s), then KILLs; removes the pid file.
stop_pid() {
  local file=$1 secs=${2:-30} pid i
  if pid_alive "$file"; then
    pid=$(cat "$file")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < secs * 4; i++)); do proc_alive "$pid" || break; sleep 0.25; done
    if proc_alive "$pid"; then log "pid $pid ignored TERM for ${secs}s, killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$file"
}

# wait_until SECONDS DESCRIPTION CMD... polls CMD every half second until it succeeds or time is up.
wait_until() {
  local secs=$1 what=$2 i; shift 2
  for ((i = 0; i < secs * 2; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  log "timed out after ${secs}s waiting for $what"
  return 1
}

# show_logs FILE... prints the tail of each existing log, for a failing start.
show_logs() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || continue
    printf '\n----- last 60 lines of %s -----\n' "$f" >&2
    tail -n 60 "$f" >&2
  done
}

# port_free PORT succeeds when nothing listens on PORT. ss also sees a socket that is still bound
# by a server shutting down (no longer accepting, so a connect test would call it free).
port_free() {
  if command -v ss >/dev/null 2>&1; then
    [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
  else
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# http_ok URL succeeds when URL answers 2xx.
http_ok() { curl -fsS --max-time 5 "$1" >/dev/null 2>&1; }

# no_autostart CMD... runs CMD with a policy-rc.d that forbids maintainer scripts to start
# services, so installing a server package never brings up Debian's default instance. An
# existing policy-rc.d (container images ship one) is left as it is.
no_autostart() {
  local policy=/usr/sbin/policy-rc.d rc=0
  if [ -e "$policy" ]; then "$@"; return; fi
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
  "$@" || rc=$?
  rm -f "$policy"
  return "$rc"
}

# procs_of [--env VAR=VALUE] COMM ARG... prints the pids of live processes whose command name
# (/proc/PID/comm, cut to 15 characters by the kernel) is COMM, that have every ARG among their
# command-line arguments (each matched whole) and, with --env, VAR=VALUE in their initial
# environment. A server is found this way, by the data dir or config it runs on, whatever its pid
# file says; so is an instance of ours whose run dir (and pid file) was wiped while it ran.
procs_of() {
  local env='' p pid c args a
  if [ "$1" = --env ]; then env=$2; shift 2; fi
  local comm=${1:0:15}; shift
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$pid" = "$$" ] && continue
    c=
    read -r c 2>/dev/null <"$p/comm" || continue
    [ "$c" = "$comm" ] || continue
    args=$(tr '\0' '\n' 2>/dev/null <"$p/cmdline") || continue
    for a in "$@"; do grep -qxF -- "$a" <<<"$args" || continue 2; done
    if [ -n "$env" ]; then tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF -- "$env" || continue; fi
    proc_alive "$pid" && echo "$pid"
  done
  return 0
}

# search_ours URL CLUSTER [WAIT] succeeds when the Elasticsearch/OpenSearch node at URL answers
# with our cluster name, which proves the port is ours, not another server's. With WAIT (a start
# waiting for readiness) the cluster must also be yellow: every primary allocated.
search_ours() {
  local health q=
  [ -n "${3:-}" ] && q='?wait_for_status=yellow&timeout=2s'
  health=$(curl -fsS --max-time 5 "$1/_cluster/health$q" 2>/dev/null) &&
    [[ $health == *"\"cluster_name\":\"$2\""* ]]
}

# ---- One server's command line: up | down | stop | start | restart | status | env ----
#
# The sourcing script sets SERVER_RUN (its run dir), SERVER_PIDFILE and SERVER_PORTS (every port it
# listens on) and defines:
#   server_pids  its server process on this instance, from /proc (procs_of), never from a pid file
#   probe        a real readiness probe that also proves the answer is this instance's
#   do_up        a fresh instance: stop what runs there, wipe SERVER_RUN, set up, start, wait ready
#   do_start     start on SERVER_RUN as it is (data and config kept), wait for readiness
#   setup_key    the settings SERVER_RUN is set up for that a start cannot change (ports, version)
#   describe, print_env
# It may define do_stop MODE SECONDS PID... and set STOP_MODES (first = default) for modes of its
# own; the default ones are graceful (TERM, then KILL after SECONDS) and kill (KILL: a crash).
STOP_MODES="graceful kill"
SERVER_PID=

# Exit status of stop and restart when the server had to be killed because the requested mode did
# not stop it within the timeout (a restart still starts it again).
STOP_FORCED=4

setup_file() { printf '%s\n' "$SERVER_RUN/.testenv-setup"; }
record_setup() { setup_key >"$(setup_file)"; }

# is_running succeeds when the server process runs on this instance and answers the probe; it
# sets SERVER_PID and rewrites a stale pid file (restarted with the server's own tools), and it
# removes a pid file that names a dead process (killed, not restarted).
is_running() {
  local pids
  SERVER_PID=
  pids=$(server_pids)
  if [ -z "$pids" ]; then
    if [ -f "$SERVER_PIDFILE" ] && ! pid_alive "$SERVER_PIDFILE"; then rm -f "$SERVER_PIDFILE"; fi
    return 1
  fi
  probe >/dev/null 2>&1 || return 1
  SERVER_PID=${pids%%$'\n'*}
  [ "$SERVER_PID" = "$pids" ] || log "warning: more than one server process on this instance: ${pids//$'\n'/ }"
  if [ "$(cat "$SERVER_PIDFILE" 2>/dev/null)" != "$SERVER_PID" ]; then
    local tmp
    tmp=$(mktemp "$SERVER_PIDFILE.XXXXXX") || return 0
    if ! { echo "$SERVER_PID" >"$tmp" && chown --reference="$SERVER_RUN" "$tmp" && chmod 644 "$tmp" &&
      mv -f "$tmp" "$SERVER_PIDFILE"; }; then
      rm -f "$tmp"
      log "warning: could not refresh $SERVER_PIDFILE"
    fi
  fi
  return 0
}

# signal_stop SIGNAL SECONDS PID... sends SIGNAL and waits for every PID to exit; after SECONDS
# it KILLs what is left (exit $STOP_FORCED), and fails when even that does not end them in 30 s.
signal_stop() {
  local sig=$1 secs=$2; shift 2
  kill -"$sig" "$@" 2>/dev/null || true
  # A stopped (SIGSTOP) server acts on the signal only once it is continued.
  kill -CONT "$@" 2>/dev/null || true
  wait_gone "$secs" "$@" && return 0
  [ "$sig" = KILL ] || {
    log "still running ${secs}s after SIG$sig: killing $(alive_of "$@")"
    # shellcheck disable=SC2046 # one pid per word
    kill -KILL $(alive_of "$@") 2>/dev/null || true
    wait_gone 30 "$@" && return "$STOP_FORCED"
  }
  log "error: $(alive_of "$@") survived SIGKILL for 30s"
  return 1
}

alive_of() { local pid; for pid in "$@"; do proc_alive "$pid" && echo "$pid"; done; return 0; }

# wait_gone SECONDS PID... waits until none of PID is alive.
wait_gone() {
  local secs=$1 i; shift
  for ((i = 0; i < secs * 4; i++)); do
    [ -z "$(alive_of "$@")" ] && return 0
    sleep 0.25
  done
  [ -z "$(alive_of "$@")" ]
}

# do_stop MODE SECONDS PID... is the default stop; a script with modes of its own overrides it.
do_stop() {
  local mode=$1 secs=$2; shift 2
  case $mode in
    graceful) signal_stop TERM "$secs" "$@" ;;
    kill) signal_stop KILL 30 "$@" ;;
    *) die "unknown stop mode $mode" ;;
  esac
}

# server_stop MODE SECONDS stops the server and keeps its run dir.
server_stop() {
  local pids rc=0
  pids=$(server_pids)
  if [ -z "$pids" ]; then
    log "not running"
    rm -f "$SERVER_PIDFILE"
    return 0
  fi
  # A server that answers was set up completely, also when its setup predates the records: so
  # that the start after this stop keeps its data.
  if [ ! -f "$(setup_file)" ] && is_running; then record_setup; fi
  log "stopping pid ${pids//$'\n'/ } (mode $1)"
  # shellcheck disable=SC2086
  do_stop "$1" "$2" $pids || rc=$?
  [ $rc -eq 0 ] || [ $rc -eq "$STOP_FORCED" ] || return $rc
  rm -f "$SERVER_PIDFILE"
  if [ $rc -eq 0 ]; then log "stopped"; else log "stopped, but only by force: mode $1 did not stop it within $2s"; fi
  return $rc
}

# stop_leftover stops what still runs on this instance before up wipes it (alive but not
# answering: hung, or half started by a failed run).
stop_leftover() {
  [ -n "$(server_pids)" ] || return 0
  log "a server runs on $SERVER_RUN but does not answer: stopping it"
  server_stop "${STOP_MODES%% *}" 30 || [ $? -eq "$STOP_FORCED" ] || die "could not stop it"
}

# server_up starts a fresh instance unless one runs. A running one is reused; its setup record is
# written when it predates the records.
server_up() {
  if is_running; then
    [ -f "$(setup_file)" ] || record_setup
    log "already running, reused: $(describe)"
    return 0
  fi
  do_up
  record_setup
  is_running || die "started, but the server does not answer"
  log "up: $(describe)"
}

# server_start starts the server on its existing run dir, or a fresh one when no up finished there.
server_start() {
  local want have port
  if is_running; then log "already running: $(describe)"; return 0; fi
  if [ ! -f "$(setup_file)" ]; then
    log "$SERVER_RUN holds no finished setup: starting a fresh instance, as up does"
    server_up
    return
  fi
  want=$(setup_key)
  have=$(cat "$(setup_file)")
  [ "$want" = "$have" ] || die "$SERVER_RUN is set up for '$have' but this environment asks for '$want': start it with the settings it was set up with, or 'down' then 'up' for a fresh instance"
  stop_leftover
  for port in $SERVER_PORTS; do
    wait_until 20 "port $port to be free" port_free "$port" || die "127.0.0.1:$port is taken by another process"
  done
  do_start
  is_running || die "started, but the server does not answer"
  log "started: $(describe)"
}

usage_die() { echo "$0: $*" >&2; exit 2; }

# proc_paused PID succeeds when PID is stopped by a signal (state T in /proc/PID/stat).
proc_paused() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" = T ]
}

# server_signal STOP|CONT pauses or continues the server process (testenv pause|resume).
server_signal() {
  local pids
  pids=$(server_pids)
  [ -n "$pids" ] || die "not running"
  # shellcheck disable=SC2086 # one pid per word
  kill -"$1" $pids
  # A stop takes effect thread by thread: wait (bounded) until every thread of every process
  # is stopped, so that nothing the caller sends after "pause" returns is still answered.
  if [ "$1" = STOP ]; then
    local pid t deadline=$((SECONDS + 20)) running
    while :; do
      running=
      for pid in $pids; do
        for t in /proc/"$pid"/task/*; do
          [ -e "$t/stat" ] || continue
          proc_paused "$pid/task/${t##*/}" || { running=1; break 2; }
        done
      done
      [ -z "$running" ] && break
      [ "$SECONDS" -lt "$deadline" ] || die "pid ${pids//$'\n'/ } did not stop within 20 s"
      sleep 0.05
    done
  fi
  log "SIG$1 sent to pid ${pids//$'\n'/ }"
}

# main_dispatch handles the command line of a server script:
#   up | down | status | env | modes | stop [--mode M] [--timeout S] | start | restart [--mode M] [--timeout S]
#   | pause | resume
main_dispatch() {
  local cmd=${1:-} mode='' secs=60 rc=0
  [ $# -gt 0 ] && shift
  while [ $# -gt 0 ]; do
    case $1 in
      --mode) [ $# -ge 2 ] || usage_die "--mode needs a value"; mode=$2; shift 2 ;;
      --mode=*) mode=${1#--mode=}; shift ;;
      --timeout) [ $# -ge 2 ] || usage_die "--timeout needs a value"; secs=$2; shift 2 ;;
      --timeout=*) secs=${1#--timeout=}; shift ;;
      *) usage_die "unexpected argument '$1'" ;;
    esac
    case $cmd in stop | restart) ;; *) usage_die "$cmd takes no options" ;; esac
  done
  [[ $secs =~ ^[1-9][0-9]*$ ]] || usage_die "--timeout wants whole seconds, got '$secs'"
  mode=${mode:-${STOP_MODES%% *}}
  case " $STOP_MODES " in *" $mode "*) ;; *) usage_die "$TESTENV_NAME: no stop mode '$mode' (modes: $STOP_MODES)" ;; esac
  case "$cmd" in
    up) server_up ;;
    down) server_stop "${STOP_MODES%% *}" 30 || [ $? -eq "$STOP_FORCED" ] ;;
    stop) server_stop "$mode" "$secs" ;;
    start) server_start ;;
    restart)
      server_stop "$mode" "$secs" || rc=$?
      [ $rc -eq 0 ] || [ $rc -eq "$STOP_FORCED" ] || return $rc
      server_start
      return $rc
      ;;
    status)
      if is_running; then
        echo "$TESTENV_NAME: running: $(describe)"
      else
        local pids
        pids=$(server_pids)
        if [ -n "$pids" ] && proc_paused "${pids%%$'\n'*}"; then
          echo "$TESTENV_NAME: paused (pid ${pids//$'\n'/ } is SIGSTOPped: testenv resume $TESTENV_NAME)"
        elif [ -n "$pids" ]; then echo "$TESTENV_NAME: stopped (pid ${pids//$'\n'/ } runs but does not answer)"; else echo "$TESTENV_NAME: stopped"; fi
        return 3
      fi
      ;;
    env) print_env ;;
    modes) echo "$STOP_MODES" ;;
    pause) server_signal STOP ;;
    resume) server_signal CONT ;;
    *) usage_die "usage: up|down|stop [--mode M] [--timeout S]|start|restart [--mode M] [--timeout S]|status|env|modes|pause|resume" ;;
  esac
}

# ---- Shared by the search-engine scripts ----

# install_es_dist VERSION HOME unpacks Elasticsearch's integ-test zip (Maven Central) into HOME
# unless it is there. It has no bundled JDK and four modules (apm, transport-netty4, x-pack-core,
# x-pack-security). HOME is shared by every instance of that version (elasticsearch, es-secure's
# base, escluster) and never written after; the scripts that use it start in parallel, so the
# download and the unpacking happen under one lock, once.
install_es_dist() {
  local version=$1 home=$2
  [ -x "$home/bin/elasticsearch" ] && return 0
  apt_ensure mvn maven
  apt_ensure unzip unzip
  mkdir -p "$TESTENV_HOME/dist"
  (
    flock -w 900 9 || die "waited 15 minutes for another install of elasticsearch $version"
    [ -x "$home/bin/elasticsearch" ] && exit 0
    local dl stage
    dl=$(dl_dir elasticsearch)
    [ -f "$dl/elasticsearch-$version.zip" ] ||
      mvn_fetch "org.elasticsearch.distribution.integ-test-zip:elasticsearch:$version:zip" "$dl"
    # Unpack beside the final place and rename, so an interrupted unzip never leaves a half
    # distribution that a later run would take as installed.
    stage=$(mktemp -d "$TESTENV_HOME/dist/.elasticsearch-$version.XXXXXX")
    unzip -q "$dl/elasticsearch-$version.zip" -d "$stage"
    chmod -R a+rX "$stage/elasticsearch-$version"
    chmod +x "$stage/elasticsearch-$version"/bin/*
    rm -rf "$home"
    mv "$stage/elasticsearch-$version" "$home"
    rmdir "$stage"
    log "installed $(cd "$home/modules" && echo *)"
  ) 9>"$TESTENV_HOME/dist/.elasticsearch-$version.lock"
}

# es_launch_node NAME HOME CONF PIDFILE LOGDIR HEAPOPTS starts one Elasticsearch node as the service
# user on CONF (its data and logs named there), daemonized (-d returns once the node has started or
# failed; the pid file names the server JVM), and prints its launch log and node log on failure.
es_launch_node() {
  local name=$1 home=$2 conf=$3 pidfile=$4 logdir=$5 heap=$6
  # The node proved gone (server_pids): a pid file left by a kill is stale.
  rm -f "$pidfile"
  # JAVA_HOME is dropped because the launcher only reads ES_JAVA_HOME and warns about the other.
  if ! timeout 300 runuser -u "$TESTENV_SVC_USER" -- env -u JAVA_HOME \
    ES_JAVA_HOME="$TESTENV_JDK" ES_PATH_CONF="$conf" ES_JAVA_OPTS="$heap" \
    "$home/bin/elasticsearch" -d -p "$pidfile" >>"$logdir/launch.log" 2>&1; then
    show_logs "$logdir/launch.log" "$(ls -t "$logdir"/*.log 2>/dev/null | grep -v launch.log | head -n 1)"
    log "error: $name failed to start (launcher exit status non-zero or 300 s passed)"
    return 1
  fi
}

# secure_up INSTALL LAUNCH is the do_up of a secured search server (es-secure, os-secure): curl
# and the JDK, the service user, INSTALL (its distribution), no leftover server, its ports free,
# write_config, LAUNCH.
secure_up() {
  apt_ensure curl curl
  apt_ensure "$TESTENV_JDK/bin/java" openjdk-17-jre-headless
  ensure_svc_user || id "$TESTENV_SVC_USER" >/dev/null
  "$1"
  stop_leftover
  local port
  for port in $SERVER_PORTS; do
    wait_until 20 "port $port to be free" port_free "$port" || die "port $port is taken by another process"
  done
  write_config
  "$2"
}

# secure_env NAME URL CERTS USER PASSWORD CLIENT_USER prints the variables of a secured search
# server (internal/testenv's Secure): TRIBUTARY_<NAME>_SECURE_*, the PKI's files in CERTS.
secure_env() {
  cat <<ENV
export TRIBUTARY_$1_SECURE_URL=$2
export TRIBUTARY_$1_SECURE_CA=$3/ca.pem
export TRIBUTARY_$1_SECURE_USER=$4
export TRIBUTARY_$1_SECURE_PASSWORD=$5
export TRIBUTARY_$1_SECURE_CLIENT_CERT=$3/client.pem
export TRIBUTARY_$1_SECURE_CLIENT_KEY=$3/client.key
export TRIBUTARY_$1_SECURE_CLIENT_USER=$6
ENV
}

# make_test_pki DIR makes a throw-away PKI for one secured server in DIR: a CA (ca.pem, ca.key), a
# node certificate (node.pem, node.key: CN=tributary-node, SAN IP 127.0.0.1 and DNS localhost,
# server and client use, as transport TLS needs both), a client certificate (client.pem,
# client.key: CN=tributary-client) and an admin certificate (admin.pem, admin.key:
# CN=tributary-admin, for OpenSearch's securityadmin). Keys are unencrypted PKCS#8 (RSA 2048);
# these are test credentials, never reused.
make_test_pki() {
  local dir=$1 name
  apt_ensure openssl openssl
  mkdir -p "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/O=Tributary/CN=Tributary Test CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  for name in node client admin; do
    openssl req -newkey rsa:2048 -nodes -subj "/O=Tributary/CN=tributary-$name" \
      -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
    {
      echo "basicConstraints=CA:FALSE"
      echo "keyUsage=critical,digitalSignature,keyEncipherment"
      case $name in
        node) echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=IP:127.0.0.1,DNS:localhost" ;;
        *) echo "extendedKeyUsage=clientAuth" ;;
      esac
    } >"$dir/$name.ext"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
      -days 3650 -sha256 -extfile "$dir/$name.ext" -out "$dir/$name.pem" 2>/dev/null
    rm -f "$dir/$name.csr" "$dir/$name.ext"
  done
  rm -f "$dir/ca.srl"
  chmod 755 "$dir"
  chmod 644 "$dir"/*
  # The servers warn about keys others can read; the client's stays readable for the tests.
  chmod 600 "$dir/ca.key" "$dir/node.key" "$dir/admin.key"
}

# secure_ours URL CLUSTER CA USER PASSWORD [WAIT] is search_ours over TLS verified with CA and with
# basic authentication.
secure_ours() {
  local health q=
  [ -n "${6:-}" ] && q='?wait_for_status=yellow&timeout=2s'
  health=$(curl -fsS --max-time 5 --cacert "$3" -u "$4:$5" "$1/_cluster/health$q" 2>/dev/null) &&
    [[ $health == *"\"cluster_name\":\"$2\""* ]]
}

# add_mapper_extras HOME VERSION turns the published client jar of OpenSearch's mapper-extras module
# back into a module of the distribution in HOME: the jar holds the plugin classes but no
# plugin-descriptor.properties, so one is written here. PluginInfo rejects unknown keys, so only
# the keys the bundled modules use appear.
add_mapper_extras() {
  local home=$1 version=$2 dir cls
  dir=$home/modules/mapper-extras
  mkdir -p "$dir"
  mvn_fetch "org.opensearch.plugin:mapper-extras-client:$version" "$dir"
  cls=$(unzip -Z1 "$dir/mapper-extras-client-$version.jar" |
    grep -E '^org/opensearch/index/mapper/MapperExtras(Module)?Plugin\.class$' | head -n 1 |
    sed 's#/#.#g; s#\.class$##')
  [ -n "$cls" ] || die "no MapperExtras plugin class in mapper-extras-client-$version.jar"
  cat >"$dir/plugin-descriptor.properties" <<PROPS
description=Adds advanced field mappers
version=$version
name=mapper-extras
classname=$cls
java.version=11
opensearch.version=$version
custom.foldername=
extended.plugins=
has.native.controller=false
PROPS
}

# os_run_config HOME RUN copies HOME's config into RUN/config with a 512 MB heap and the heap
# dumps, GC and crash logs (relative to the read-only distribution in the stock jvm.options) moved
# into RUN.
os_run_config() {
  local home=$1 run=$2
  cp -r "$home/config" "$run/config"
  sed -i -e "s#^-Xms1g#-Xms512m#; s#^-Xmx1g#-Xmx512m#" \
    -e "s#HeapDumpPath=data#HeapDumpPath=$run/data#" \
    -e "s#ErrorFile=logs/#ErrorFile=$run/logs/#" \
    -e "s#file=logs/gc.log#file=$run/logs/gc.log#" \
    -e "s#-Xloggc:logs/gc.log#-Xloggc:$run/logs/gc.log#" \
    "$run/config/jvm.options"
}
