#!/usr/bin/env bash
# Elasticsearch 8.19 single node for integration tests, from the integ-test-zip on Maven Central.
#
# That zip is the only Elasticsearch 8 build on Central. It has no bundled JDK and only four
# modules (apm, transport-netty4, x-pack-core, x-pack-security), so `GET /` (module rest-root) and
# scaled_float (module mapper-extras) are missing; see internal/smoke/search_test.go.
# The unpacked distribution in dist/ stays untouched (root-owned, shared by every run); the config
# copy (ES_PATH_CONF), data and logs live in run/elasticsearch, owned by the service user.
TESTENV_NAME=elasticsearch
# shellcheck source=scripts/testenv/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# 8.19.21 is what the range [8.19.0,8.20.0) resolved to on Maven Central (2026-11).
ES_VERSION=${TRIBUTARY_ES_VERSION:-8.19.21}
ES_HOME=$(dist_dir "elasticsearch-$ES_VERSION")
ES_RUN=$(run_dir elasticsearch)
ES_PIDFILE=$ES_RUN/elasticsearch.pid
ES_URL=http://127.0.0.1:$ES_HTTP_PORT
ES_CLUSTER=tributary-es

SERVER_RUN=$ES_RUN
SERVER_PIDFILE=$ES_PIDFILE
SERVER_PORTS="$ES_HTTP_PORT $ES_TRANSPORT_PORT"

# server_pids: the server JVM (not the launcher, which runs another main class), on our config
# copy. Its arguments name only the distribution, so the config is matched in its environment.
server_pids() {
  procs_of --env "ES_PATH_CONF=$ES_RUN/config" java org.elasticsearch.server/org.elasticsearch.bootstrap.Elasticsearch
}

probe() { search_ours "$ES_URL" "$ES_CLUSTER"; }
es_ready() { search_ours "$ES_URL" "$ES_CLUSTER" yellow; }

setup_key() { echo "elasticsearch $ES_VERSION http $ES_HTTP_PORT transport $ES_TRANSPORT_PORT"; }

install_es() { install_es_dist "$ES_VERSION" "$ES_HOME"; }

write_config() {
  rm -rf "$ES_RUN"
  mkdir -p "$ES_RUN/data" "$ES_RUN/logs"
  cp -r "$ES_HOME/config" "$ES_RUN/config"
  # Security must be switched off explicitly: x-pack-security is in the zip and would otherwise
  # generate TLS certificates and passwords on the first start.
  cat >"$ES_RUN/config/elasticsearch.yml" <<YML
cluster.name: $ES_CLUSTER
node.name: es-1
discovery.type: single-node
network.host: 127.0.0.1
http.port: $ES_HTTP_PORT
transport.port: $ES_TRANSPORT_PORT
path.data: $ES_RUN/data
path.logs: $ES_RUN/logs
cluster.routing.allocation.disk.threshold_enabled: false
action.destructive_requires_name: false
xpack.security.enabled: false
YML
  chown -R "$TESTENV_SVC_USER:" "$ES_RUN"
}

# es_launch starts the node on the config and data in run/ and waits until it is yellow.
es_launch() {
  # The node proved gone (server_pids): a pid file left by a kill is stale.
  rm -f "$ES_PIDFILE"
  # -d returns once the node has started (or failed); the pid file names the server JVM.
  # JAVA_HOME is dropped because the launcher only reads ES_JAVA_HOME and warns about the other.
  if ! timeout 240 runuser -u "$TESTENV_SVC_USER" -- env -u JAVA_HOME \
    ES_JAVA_HOME="$TESTENV_JDK" ES_PATH_CONF="$ES_RUN/config" ES_JAVA_OPTS="-Xms512m -Xmx512m" \
    "$ES_HOME/bin/elasticsearch" -d -p "$ES_PIDFILE" >>"$ES_RUN/logs/launch.log" 2>&1; then
    show_logs "$ES_RUN/logs/launch.log" "$ES_RUN/logs/$ES_CLUSTER.log"
    die "elasticsearch $ES_VERSION failed to start"
  fi
  if ! wait_until 180 "elasticsearch on $ES_URL" es_ready; then
    show_logs "$ES_RUN/logs/launch.log" "$ES_RUN/logs/$ES_CLUSTER.log"
    server_stop graceful 30 || true
    die "elasticsearch $ES_VERSION did not become ready"
  fi
}

do_up() {
  apt_ensure curl curl
  apt_ensure "$TESTENV_JDK/bin/java" openjdk-17-jre-headless
  # Another server script may create the user at the same moment; losing that race is fine.
  ensure_svc_user || id "$TESTENV_SVC_USER" >/dev/null
  install_es
  stop_leftover
  wait_until 20 "port $ES_HTTP_PORT to be free" port_free "$ES_HTTP_PORT" || die "port $ES_HTTP_PORT is taken by another process"
  wait_until 20 "port $ES_TRANSPORT_PORT to be free" port_free "$ES_TRANSPORT_PORT" || die "port $ES_TRANSPORT_PORT is taken by another process"
  write_config
  es_launch
}

do_start() { es_launch; }

describe() { echo "elasticsearch $ES_VERSION pid ${SERVER_PID:-?} at $ES_URL"; }

print_env() { echo "export TRIBUTARY_ES_URL=$ES_URL"; }

main_dispatch "$@"
