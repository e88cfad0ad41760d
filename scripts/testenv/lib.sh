# shellcheck shell=bash
# Shared helpers for the per-server scripts in this directory. Sourced, never run.
#
# Layout (TRIBUTARY_TESTENV_HOME, default /var/tmp/tributary-testenv; outside /root so the
# unprivileged service user can traverse it, and outside the checkout so downloads and unpacked
# distributions survive fresh clones):
#   dl/<server>/        downloaded archives (Maven artifacts also stay in ~/.m2)
#   dist/<server>-<v>/  unpacked distributions, reused between runs
#   run/<server>/       data, config, logs and the pid file of the running instance; wiped on a fresh start
set -euo pipefail

TESTENV_HOME=${TRIBUTARY_TESTENV_HOME:-/var/tmp/tributary-testenv}
TESTENV_SVC_USER=${TRIBUTARY_TESTENV_USER:-tributary}
TESTENV_JDK=${TRIBUTARY_TESTENV_JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
TESTENV_MDP=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
TESTENV_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TESTENV_REPO=$(cd "$TESTENV_SCRIPTS/../.." && pwd)

# Loopback ports; every one can be overridden from the environment.
ES_HTTP_PORT=${TRIBUTARY_ES_PORT:-39200}
ES_TRANSPORT_PORT=${TRIBUTARY_ES_TRANSPORT_PORT:-39300}
OS_HTTP_PORT=${TRIBUTARY_OPENSEARCH_PORT:-39201}
OS_TRANSPORT_PORT=${TRIBUTARY_OPENSEARCH_TRANSPORT_PORT:-39301}
KAFKA_PORT=${TRIBUTARY_KAFKA_PORT:-39092}
KAFKA_CONTROLLER_PORT=${TRIBUTARY_KAFKA_CONTROLLER_PORT:-39093}
PG_PORT=${TRIBUTARY_PG_PORT:-35432}
MYSQL_PORT=${TRIBUTARY_MYSQL_PORT:-33306}
MONGO_PORT=${TRIBUTARY_MONGO_PORT:-37017}

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

# pids_with_arg ARG prints the pids of processes one of whose command-line arguments is exactly
# ARG. It finds an instance of ours whose run dir (and pid file) was wiped while it ran.
pids_with_arg() {
  local f pid
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    [ "$pid" = "$$" ] && continue
    if { tr '\0' '\n' <"$f"; } 2>/dev/null | grep -qxF -- "$1"; then echo "$pid"; fi
  done
}

# search_running PIDFILE URL CLUSTER succeeds when the Elasticsearch/OpenSearch node of PIDFILE
# answers at URL with our cluster name (which proves the port is ours, not another server's).
search_running() {
  local health
  pid_alive "$1" &&
    health=$(curl -fsS --max-time 5 "$2/_cluster/health" 2>/dev/null) &&
    [[ $health == *"\"cluster_name\":\"$3\""* ]]
}

# main_dispatch handles the common command line: up | down | status | env.
# The sourcing script defines do_up, do_down, is_running, describe and print_env.
main_dispatch() {
  case "${1:-}" in
    up)
      if is_running; then log "already running, reused: $(describe)"; return 0; fi
      do_up
      log "up: $(describe)"
      ;;
    down) do_down ;;
    status)
      if is_running; then echo "$TESTENV_NAME: running: $(describe)"; else echo "$TESTENV_NAME: stopped"; return 3; fi
      ;;
    env) print_env ;;
    *) echo "usage: $0 up|down|status|env" >&2; return 2 ;;
  esac
}
