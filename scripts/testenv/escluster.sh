#!/usr/bin/env bash
# A three-node Elasticsearch 8.19 cluster for integration and fault tests of several URLs: nodes
# es-c1..es-c3, all master-eligible and data nodes, security off (as elasticsearch.sh), from the
# same integ-test zip and distribution directory. Node N listens on http ESC_HTTP_BASE+N and
# transport ESC_TRANSPORT_BASE+N (19231..19233, 19331..19333); each has its config, data and logs in
# run/escluster/es-cN. action.auto_create_index is left unset: a stock cluster.
#
#   escluster.sh up                fresh cluster unless one was set up: then the stopped nodes start
#   escluster.sh down              stop every node (data kept)
#   escluster.sh stop [--node N] [--mode graceful|kill] [--timeout S]
#   escluster.sh start [--node N]  returns once the node (every node) has joined and the cluster is
#                                  at least yellow; a node alone (no quorum) cannot, and fails
#   escluster.sh restart [--node N] [--mode M] [--timeout S]
#   escluster.sh pause|resume [--node N]   SIGSTOP / SIGCONT the node's JVM
#   escluster.sh status [--node N] one line per node and one for the cluster; exit 3 when one is down
#   escluster.sh env|modes|answers  (answers: exit 0 when some node answers)
#
# The first formation needs cluster.initial_master_nodes; once the cluster has formed, the setting
# is removed from every node's config (a restarted node rejoins by its cluster UUID).
TESTENV_NAME=escluster
# shellcheck source=scripts/testenv/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ESC_VERSION=${TRIBUTARY_ES_VERSION:-8.19.21}
ESC_HOME=$(dist_dir "elasticsearch-$ESC_VERSION")
ESC_RUN=$(run_dir escluster)
ESC_CLUSTER=tributary-escluster
ESC_NODES=(1 2 3)
ESC_HEAP="-Xms384m -Xmx512m"
STOP_MODES="graceful kill"

node_dir() { printf '%s\n' "$ESC_RUN/es-c$1"; }
node_http() { echo $((ESC_HTTP_BASE + $1)); }
node_transport() { echo $((ESC_TRANSPORT_BASE + $1)); }
node_url() { echo "http://127.0.0.1:$(node_http "$1")"; }
node_pidfile() { printf '%s\n' "$ESC_RUN/es-c$1/es.pid"; }

# node_pids N: the server JVM of node N, found by its config dir in its environment.
node_pids() {
  procs_of --env "ES_PATH_CONF=$(node_dir "$1")/config" java org.elasticsearch.server/org.elasticsearch.bootstrap.Elasticsearch
}

# node_answers N: node N answers with our cluster name (its local view: no master needed).
node_answers() {
  local health
  health=$(curl -fsS --max-time 5 "$(node_url "$1")/_cluster/health?local=true" 2>/dev/null) &&
    [[ $health == *"\"cluster_name\":\"$ESC_CLUSTER\""* ]]
}

# node_paused N: node N's JVM is stopped by SIGSTOP.
node_paused() {
  local pids
  pids=$(node_pids "$1")
  [ -n "$pids" ] && proc_paused "${pids%%$'\n'*}"
}

# live_nodes prints the nodes whose JVM runs and is not paused.
live_nodes() {
  local n
  for n in "${ESC_NODES[@]}"; do
    [ -n "$(node_pids "$n")" ] && ! node_paused "$n" && echo "$n"
  done
  return 0
}

# cluster_ready N K: through node N, the cluster has a master, at least K nodes, and is yellow.
cluster_ready() {
  local health
  health=$(curl -fsS --max-time 8 "$(node_url "$1")/_cluster/health?wait_for_status=yellow&wait_for_nodes=>=$2&timeout=3s" 2>/dev/null) &&
    [[ $health == *"\"cluster_name\":\"$ESC_CLUSTER\""* ]] && [[ $health == *'"timed_out":false'* ]]
}

setup_file() { printf '%s\n' "$ESC_RUN/.testenv-setup"; }
setup_key() {
  echo "escluster $ESC_VERSION http $(node_http 1),$(node_http 2),$(node_http 3) transport $(node_transport 1),$(node_transport 2),$(node_transport 3)"
}

write_node_config() {
  local n=$1 dir
  dir=$(node_dir "$n")
  mkdir -p "$dir/data" "$dir/logs"
  cp -r "$ESC_HOME/config" "$dir/config"
  cat >"$dir/config/elasticsearch.yml" <<YML
cluster.name: $ESC_CLUSTER
node.name: es-c$n
network.host: 127.0.0.1
http.port: $(node_http "$n")
transport.port: $(node_transport "$n")
discovery.seed_hosts: [ "127.0.0.1:$(node_transport 1)", "127.0.0.1:$(node_transport 2)", "127.0.0.1:$(node_transport 3)" ]
cluster.initial_master_nodes: [ es-c1, es-c2, es-c3 ]
path.data: $dir/data
path.logs: $dir/logs
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: false
xpack.security.enabled: false
YML
}

# launch_nodes N... starts the nodes in parallel (each daemonized: -d returns once it has started);
# fails when any launcher failed.
launch_nodes() {
  local n pids=() rc=0 p dir
  for n in "$@"; do
    dir=$(node_dir "$n")
    es_launch_node "es-c$n" "$ESC_HOME" "$dir/config" "$(node_pidfile "$n")" "$dir/logs" "$ESC_HEAP" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

# wait_ready N...: every node named answers, and the cluster (seen through the first of them) is
# yellow with at least as many nodes as run unpaused.
wait_ready() {
  local n want
  for n in "$@"; do
    wait_until 300 "es-c$n on $(node_url "$n")" node_answers "$n" || return 1
  done
  want=$(live_nodes | wc -l)
  wait_until 300 "the cluster to have $want nodes and be yellow (through es-c$1)" cluster_ready "$1" "$want"
}

logs_of() { local n; for n in "$@"; do show_logs "$(node_dir "$n")/logs/launch.log" "$(node_dir "$n")/logs/$ESC_CLUSTER.log"; done; }

# start_nodes N...: starts those of the nodes that are not running and waits for the cluster.
start_nodes() {
  local n todo=() port
  for n in "$@"; do
    if [ -n "$(node_pids "$n")" ]; then
      if node_paused "$n"; then die "es-c$n is paused: resume it (testenv resume escluster --node $n)"; fi
      node_answers "$n" && continue
      log "es-c$n runs but does not answer: stopping it"
      stop_nodes graceful 30 "$n" || [ $? -eq "$STOP_FORCED" ] || die "could not stop es-c$n"
    fi
    for port in "$(node_http "$n")" "$(node_transport "$n")"; do
      wait_until 20 "port $port to be free" port_free "$port" || die "127.0.0.1:$port is taken by another process"
    done
    todo+=("$n")
  done
  if [ ${#todo[@]} -gt 0 ]; then
    log "starting ${todo[*]/#/es-c}"
    launch_nodes "${todo[@]}" || { logs_of "${todo[@]}"; die "node(s) ${todo[*]} failed to start"; }
  fi
  if ! wait_ready "$@"; then
    logs_of "$@"
    die "the cluster did not become ready with node(s) $* (a node alone cannot elect a master: start the others too)"
  fi
}

# stop_nodes MODE SECONDS N...: stops the nodes (in parallel); exit STOP_FORCED when a kill was needed.
stop_nodes() {
  local mode=$1 secs=$2 n pids=() p rc=0; shift 2
  for n in "$@"; do
    p=$(node_pids "$n")
    if [ -z "$p" ]; then rm -f "$(node_pidfile "$n")"; continue; fi
    # shellcheck disable=SC2206 # one pid per word
    pids+=($p)
  done
  if [ ${#pids[@]} -eq 0 ]; then log "node(s) $* not running"; return 0; fi
  log "stopping node(s) $* (pid ${pids[*]}, mode $mode)"
  case $mode in
    graceful) signal_stop TERM "$secs" "${pids[@]}" || rc=$? ;;
    kill) signal_stop KILL 30 "${pids[@]}" || rc=$? ;;
    *) die "unknown stop mode $mode" ;;
  esac
  [ $rc -eq 0 ] || [ $rc -eq "$STOP_FORCED" ] || return $rc
  for n in "$@"; do rm -f "$(node_pidfile "$n")"; done
  log "stopped node(s) $*"
  return $rc
}

cmd_up() {
  local n running=()
  for n in "${ESC_NODES[@]}"; do node_answers "$n" && [ -n "$(node_pids "$n")" ] && running+=("$n"); done
  if [ -f "$(setup_file)" ] && [ "$(cat "$(setup_file)")" = "$(setup_key)" ] && [ ${#running[@]} -gt 0 ]; then
    if [ ${#running[@]} -eq 3 ] && cluster_ready 1 3; then
      log "already running, reused: $(describe)"
      return 0
    fi
    start_nodes "${ESC_NODES[@]}"
    log "up: $(describe)"
    return 0
  fi
  apt_ensure curl curl
  apt_ensure "$TESTENV_JDK/bin/java" openjdk-17-jre-headless
  ensure_svc_user || id "$TESTENV_SVC_USER" >/dev/null
  install_es_dist "$ESC_VERSION" "$ESC_HOME"
  if [ -n "$(for n in "${ESC_NODES[@]}"; do node_pids "$n"; done)" ]; then
    log "nodes run on $ESC_RUN but the cluster does not answer: stopping them"
    stop_nodes graceful 30 "${ESC_NODES[@]}" || [ $? -eq "$STOP_FORCED" ] || die "could not stop them"
  fi
  rm -rf "$ESC_RUN"
  mkdir -p "$ESC_RUN"
  for n in "${ESC_NODES[@]}"; do write_node_config "$n"; done
  chown -R "$TESTENV_SVC_USER:" "$ESC_RUN"
  start_nodes "${ESC_NODES[@]}"
  # Formed: a restarted node must not try to bootstrap a new cluster.
  for n in "${ESC_NODES[@]}"; do sed -i '/^cluster\.initial_master_nodes:/d' "$(node_dir "$n")/config/elasticsearch.yml"; done
  setup_key >"$(setup_file)"
  log "up: $(describe)"
}

cmd_start() {
  if [ ! -f "$(setup_file)" ]; then
    log "$ESC_RUN holds no finished setup: starting a fresh cluster, as up does"
    cmd_up
    return
  fi
  [ "$(cat "$(setup_file)")" = "$(setup_key)" ] ||
    die "$ESC_RUN is set up for '$(cat "$(setup_file)")' but this environment asks for '$(setup_key)': 'down' then 'up' for a fresh cluster"
  start_nodes "$@"
  log "started node(s) $*: $(describe)"
}

describe() {
  local n s='' health='' first
  for n in "${ESC_NODES[@]}"; do s="$s es-c$n pid $(node_pids "$n" | head -n 1) $(node_url "$n"),"; done
  first=$(live_nodes | head -n 1)
  if [ -n "$first" ]; then
    health=$(curl -fsS --max-time 5 "$(node_url "$first")/_cluster/health" 2>/dev/null |
      sed -n 's/.*"status":"\([a-z]*\)".*"number_of_nodes":\([0-9]*\).*/\2 nodes, \1/p') || true
  fi
  echo "elasticsearch $ESC_VERSION cluster $ESC_CLUSTER (${health:-health unknown}):${s%,}"
}

node_status() {
  local n=$1 pids
  pids=$(node_pids "$n")
  if [ -z "$pids" ]; then echo "escluster es-c$n: stopped"; return 3; fi
  if node_paused "$n"; then echo "escluster es-c$n: paused (pid ${pids//$'\n'/ } is SIGSTOPped: testenv resume escluster --node $n)"; return 3; fi
  if node_answers "$n"; then echo "escluster es-c$n: running: pid ${pids//$'\n'/ } at $(node_url "$n")"; return 0; fi
  echo "escluster es-c$n: stopped (pid ${pids//$'\n'/ } runs but does not answer)"
  return 3
}

cmd_signal() {
  local sig=$1 n pids=() p; shift
  for n in "$@"; do
    p=$(node_pids "$n")
    [ -n "$p" ] || die "es-c$n is not running"
    # shellcheck disable=SC2206
    pids+=($p)
  done
  kill -"$sig" "${pids[@]}"
  if [ "$sig" = STOP ]; then
    # As server_signal: return once every thread is stopped.
    local t deadline=$((SECONDS + 20)) running pid
    while :; do
      running=
      for pid in "${pids[@]}"; do
        for t in /proc/"$pid"/task/*; do
          [ -e "$t/stat" ] || continue
          proc_paused "$pid/task/${t##*/}" || { running=1; break 2; }
        done
      done
      [ -z "$running" ] && break
      [ "$SECONDS" -lt "$deadline" ] || die "pid ${pids[*]} did not stop within 20 s"
      sleep 0.05
    done
  fi
  log "SIG$sig sent to node(s) $* (pid ${pids[*]})"
}

main() {
  local cmd=${1:-} mode='' secs=60 nodes=() rc=0 n
  [ $# -gt 0 ] && shift
  while [ $# -gt 0 ]; do
    case $1 in
      --mode) [ $# -ge 2 ] || usage_die "--mode needs a value"; mode=$2; shift 2 ;;
      --mode=*) mode=${1#--mode=}; shift ;;
      --timeout) [ $# -ge 2 ] || usage_die "--timeout needs a value"; secs=$2; shift 2 ;;
      --timeout=*) secs=${1#--timeout=}; shift ;;
      --node) [ $# -ge 2 ] || usage_die "--node needs a value"; nodes=("$2"); shift 2 ;;
      --node=*) nodes=("${1#--node=}"); shift ;;
      *) usage_die "unexpected argument '$1'" ;;
    esac
  done
  [[ $secs =~ ^[1-9][0-9]*$ ]] || usage_die "--timeout wants whole seconds, got '$secs'"
  mode=${mode:-graceful}
  case " $STOP_MODES " in *" $mode "*) ;; *) usage_die "escluster: no stop mode '$mode' (modes: $STOP_MODES)" ;; esac
  if [ ${#nodes[@]} -eq 0 ]; then nodes=("${ESC_NODES[@]}"); fi
  for n in "${nodes[@]}"; do [[ $n =~ ^[1-3]$ ]] || usage_die "--node wants 1, 2 or 3, got '$n'"; done
  case "$cmd" in
    up) cmd_up ;;
    down) stop_nodes graceful 30 "${ESC_NODES[@]}" || [ $? -eq "$STOP_FORCED" ] ;;
    stop) stop_nodes "$mode" "$secs" "${nodes[@]}" ;;
    start) cmd_start "${nodes[@]}" ;;
    restart)
      stop_nodes "$mode" "$secs" "${nodes[@]}" || rc=$?
      [ $rc -eq 0 ] || [ $rc -eq "$STOP_FORCED" ] || return $rc
      cmd_start "${nodes[@]}"
      return $rc
      ;;
    status)
      for n in "${nodes[@]}"; do node_status "$n" || rc=3; done
      if [ $rc -eq 0 ] && [ ${#nodes[@]} -eq 3 ]; then echo "escluster: running: $(describe)"; fi
      return $rc
      ;;
    env)
      echo "export TRIBUTARY_ES_CLUSTER_URLS=$(node_url 1),$(node_url 2),$(node_url 3)"
      ;;
    modes) echo "$STOP_MODES" ;;
    answers)
      # Some node answers: the cluster serves (testenv keeps its env while a node is down).
      for n in "${ESC_NODES[@]}"; do node_answers "$n" && return 0; done
      return 3
      ;;
    pause) cmd_signal STOP "${nodes[@]}" ;;
    resume) cmd_signal CONT "${nodes[@]}" ;;
    *) usage_die "usage: up|down|stop [--node N] [--mode M] [--timeout S]|start [--node N]|restart [--node N] [--mode M] [--timeout S]|status [--node N]|env|modes|pause [--node N]|resume [--node N]" ;;
  esac
}

main "$@"
