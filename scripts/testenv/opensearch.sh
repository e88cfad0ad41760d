#!/usr/bin/env bash
# OpenSearch 2.19 single node for integration tests, from the integ-test-zip on Maven Central,
# plus the mapper-extras module (scaled_float and friends) from its client jar on Central.
#
# The integ-test-zip carries only transport-netty4 and no bundled JDK. Modules are loaded only
# from $OPENSEARCH_HOME/modules, so mapper-extras is added to the distribution while it is being
# installed (before it is moved into place); after that dist/ is never written. The config copy
# (OPENSEARCH_PATH_CONF), data and logs live in run/opensearch, owned by the service user.
TESTENV_NAME=opensearch
# shellcheck source=scripts/testenv/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# 2.19.6 is what the range [2.19.0,2.20.0) resolved to on Maven Central (2026-11); 3.x needs Java 21.
OS_VERSION=${TRIBUTARY_OPENSEARCH_VERSION:-2.19.6}
OS_HOME=$(dist_dir "opensearch-$OS_VERSION")
OS_RUN=$(run_dir opensearch)
OS_PIDFILE=$OS_RUN/opensearch.pid
OS_URL=http://127.0.0.1:$OS_HTTP_PORT
OS_CLUSTER=tributary-os

SERVER_RUN=$OS_RUN
SERVER_PIDFILE=$OS_PIDFILE
SERVER_PORTS="$OS_HTTP_PORT $OS_TRANSPORT_PORT"

# server_pids: the node JVM on our config copy.
server_pids() { procs_of java "-Dopensearch.path.conf=$OS_RUN/config"; }

probe() { search_ours "$OS_URL" "$OS_CLUSTER"; }

setup_key() { echo "opensearch $OS_VERSION http $OS_HTTP_PORT transport $OS_TRANSPORT_PORT"; }

install_os() {
  [ -f "$OS_HOME/modules/mapper-extras/plugin-descriptor.properties" ] && return 0
  apt_ensure mvn maven
  apt_ensure unzip unzip
  local dl stage
  dl=$(dl_dir opensearch)
  [ -f "$dl/opensearch-$OS_VERSION.zip" ] ||
    mvn_fetch "org.opensearch.distribution.integ-test-zip:opensearch:$OS_VERSION:zip" "$dl"
  # Assemble beside the final place and rename, so an interrupted install never leaves a half
  # distribution that a later run would take as complete.
  stage=$(mktemp -d "$TESTENV_HOME/dist/.opensearch-$OS_VERSION.XXXXXX")
  unzip -q "$dl/opensearch-$OS_VERSION.zip" -d "$stage"
  add_mapper_extras "$stage/opensearch-$OS_VERSION" "$OS_VERSION"
  chmod -R a+rX "$stage/opensearch-$OS_VERSION"
  chmod +x "$stage/opensearch-$OS_VERSION"/bin/*
  rm -rf "$OS_HOME"
  mv "$stage/opensearch-$OS_VERSION" "$OS_HOME"
  rmdir "$stage"
  log "installed modules $(cd "$OS_HOME/modules" && echo *)"
}

write_config() {
  rm -rf "$OS_RUN"
  mkdir -p "$OS_RUN/data" "$OS_RUN/logs"
  os_run_config "$OS_HOME" "$OS_RUN"
  cat >"$OS_RUN/config/opensearch.yml" <<YML
cluster.name: $OS_CLUSTER
node.name: os-1
discovery.type: single-node
network.host: 127.0.0.1
http.port: $OS_HTTP_PORT
transport.port: $OS_TRANSPORT_PORT
path.data: $OS_RUN/data
path.logs: $OS_RUN/logs
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: false
YML
  chown -R "$TESTENV_SVC_USER:" "$OS_RUN"
}

# os_launch starts the node on the config and data in run/ and waits until it is yellow.
# Started in the background rather than with -d: -d returns at once, so a node that dies while
# starting would only be noticed when the wait below timed out, whereas the launcher's pid
# (runuser, which waits for the JVM) shows it at once. -q keeps the console quiet; the node logs
# to path.logs.
os_launch() {
  # The node proved gone (server_pids): a pid file left by a kill is stale.
  rm -f "$OS_PIDFILE"
  runuser -u "$TESTENV_SVC_USER" -- env \
    OPENSEARCH_JAVA_HOME="$TESTENV_JDK" JAVA_HOME="$TESTENV_JDK" \
    OPENSEARCH_PATH_CONF="$OS_RUN/config" OPENSEARCH_JAVA_OPTS="-Xms512m -Xmx512m" \
    "$OS_HOME/bin/opensearch" -q -p "$OS_PIDFILE" </dev/null >>"$OS_RUN/logs/launch.log" 2>&1 &
  OS_LAUNCHER=$!
  if ! wait_until 180 "opensearch on $OS_URL" os_ready_or_gone || ! os_ready; then
    show_logs "$OS_RUN/logs/launch.log" "$OS_RUN/logs/$OS_CLUSTER.log"
    server_stop graceful 30 || true
    kill -TERM "$OS_LAUNCHER" 2>/dev/null || true
    die "opensearch $OS_VERSION did not start"
  fi
}

os_ready() { search_ours "$OS_URL" "$OS_CLUSTER" yellow; }

# os_ready_or_gone ends the wait early when the launcher has exited.
os_ready_or_gone() { os_ready || ! proc_alive "$OS_LAUNCHER"; }

do_up() {
  apt_ensure curl curl
  apt_ensure "$TESTENV_JDK/bin/java" openjdk-17-jre-headless
  # Another server script may create the user at the same moment; losing that race is fine.
  ensure_svc_user || id "$TESTENV_SVC_USER" >/dev/null
  install_os
  stop_leftover
  wait_until 20 "port $OS_HTTP_PORT to be free" port_free "$OS_HTTP_PORT" || die "port $OS_HTTP_PORT is taken by another process"
  wait_until 20 "port $OS_TRANSPORT_PORT to be free" port_free "$OS_TRANSPORT_PORT" || die "port $OS_TRANSPORT_PORT is taken by another process"
  write_config
  os_launch
}

do_start() { os_launch; }

describe() { echo "opensearch $OS_VERSION pid ${SERVER_PID:-?} at $OS_URL"; }

print_env() { echo "export TRIBUTARY_OPENSEARCH_URL=$OS_URL"; }

main_dispatch "$@"
