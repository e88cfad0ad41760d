#!/usr/bin/env bash
# Elasticsearch 8.19 single node with security on, as production runs it, for the tests of TLS,
# users, roles and client certificates. Same integ-test zip as elasticsearch.sh (it carries
# x-pack-security and bin/elasticsearch-users), in a distribution of its own: a hard-linked copy
# of elasticsearch.sh's plus the module es-analysis/ (the analyzers the .security index needs,
# compiled here with javac: see es-analysis/TributaryAnalysisPlugin.java).
#
# Set up on every fresh instance (run/es-secure/config/certs, made with openssl): a CA, the node's
# certificate (SAN 127.0.0.1 and localhost) for TLS on HTTP and transport, and a client
# certificate. Realms, in order: file (the admin, a superuser, that tests use to create native
# users and roles through the _security API), native, and PKI: HTTP asks for a client certificate
# (client_authentication: optional) and one signed by the CA authenticates as its CN,
# tributary-client, which config/role_mapping.yml maps to the role tributary_cert (cluster all,
# every index all). A basic-auth header wins over a client certificate (the file realm comes
# first). PKI needs more than the basic license: the node runs the self-generated trial license
# (30 days, and every up is a fresh node). action.auto_create_index is left unset: a stock cluster.
TESTENV_NAME=es-secure
# shellcheck source=scripts/testenv/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ESS_VERSION=${TRIBUTARY_ES_VERSION:-8.19.21}
ESS_BASE=$(dist_dir "elasticsearch-$ESS_VERSION")
ESS_HOME=$(dist_dir "elasticsearch-$ESS_VERSION-secure")
ESS_RUN=$(run_dir es-secure)
ESS_PIDFILE=$ESS_RUN/elasticsearch.pid
ESS_URL=https://127.0.0.1:$ES_SECURE_HTTP_PORT
ESS_CLUSTER=tributary-es-secure
ESS_CERTS=$ESS_RUN/config/certs
ESS_USER=tributary-admin
ESS_PASSWORD=tributary-es-admin-secret
ESS_CLIENT_USER=tributary-client

SERVER_RUN=$ESS_RUN
SERVER_PIDFILE=$ESS_PIDFILE
SERVER_PORTS="$ES_SECURE_HTTP_PORT $ES_SECURE_TRANSPORT_PORT"

server_pids() {
  procs_of --env "ES_PATH_CONF=$ESS_RUN/config" java org.elasticsearch.server/org.elasticsearch.bootstrap.Elasticsearch
}

probe() { secure_ours "$ESS_URL" "$ESS_CLUSTER" "$ESS_CERTS/ca.pem" "$ESS_USER" "$ESS_PASSWORD"; }
ess_ready() { secure_ours "$ESS_URL" "$ESS_CLUSTER" "$ESS_CERTS/ca.pem" "$ESS_USER" "$ESS_PASSWORD" yellow; }

setup_key() { echo "es-secure $ESS_VERSION http $ES_SECURE_HTTP_PORT transport $ES_SECURE_TRANSPORT_PORT"; }

# install_secure_dist builds ESS_HOME: the plain distribution (hard links: neither is ever written)
# and the module tributary-analysis compiled against its jars.
install_secure_dist() {
  [ -f "$ESS_HOME/modules/tributary-analysis/plugin-descriptor.properties" ] && return 0
  install_es_dist "$ESS_VERSION" "$ESS_BASE"
  apt_ensure "$TESTENV_JDK/bin/javac" openjdk-17-jdk-headless
  local stage mod
  stage=$(mktemp -d "$TESTENV_HOME/dist/.elasticsearch-$ESS_VERSION-secure.XXXXXX")
  cp -al "$ESS_BASE" "$stage/home"
  mod=$stage/home/modules/tributary-analysis
  mkdir -p "$mod" "$stage/classes"
  "$TESTENV_JDK/bin/javac" --release 17 -nowarn -cp "$ESS_BASE/lib/*" -d "$stage/classes" \
    "$TESTENV_SCRIPTS/es-analysis/TributaryAnalysisPlugin.java" >&2 || die "compiling es-analysis failed"
  "$TESTENV_JDK/bin/jar" --create --file "$mod/tributary-analysis.jar" -C "$stage/classes" . >&2
  cat >"$mod/plugin-descriptor.properties" <<PROPS
description=Analysis components of the security index missing from the integ-test zip (tributary testenv)
version=$ESS_VERSION
name=tributary-analysis
classname=dev.tributary.testenv.analysis.TributaryAnalysisPlugin
java.version=17
elasticsearch.version=$ESS_VERSION
PROPS
  chmod -R a+rX "$mod"
  rm -rf "$ESS_HOME"
  mv "$stage/home" "$ESS_HOME"
  rm -rf "$stage"
  log "installed $(cd "$ESS_HOME/modules" && echo *)"
}

write_config() {
  rm -rf "$ESS_RUN"
  mkdir -p "$ESS_RUN/data" "$ESS_RUN/logs"
  cp -r "$ESS_HOME/config" "$ESS_RUN/config"
  make_test_pki "$ESS_CERTS"
  cat >"$ESS_RUN/config/elasticsearch.yml" <<YML
cluster.name: $ESS_CLUSTER
node.name: es-secure-1
discovery.type: single-node
network.host: 127.0.0.1
http.port: $ES_SECURE_HTTP_PORT
transport.port: $ES_SECURE_TRANSPORT_PORT
path.data: $ESS_RUN/data
path.logs: $ESS_RUN/logs
cluster.routing.allocation.disk.threshold_enabled: false
xpack.license.self_generated.type: trial
xpack.security.enabled: true
xpack.security.http.ssl.enabled: true
xpack.security.http.ssl.key: certs/node.key
xpack.security.http.ssl.certificate: certs/node.pem
xpack.security.http.ssl.certificate_authorities: [ "certs/ca.pem" ]
xpack.security.http.ssl.client_authentication: optional
xpack.security.transport.ssl.enabled: true
xpack.security.transport.ssl.verification_mode: certificate
xpack.security.transport.ssl.key: certs/node.key
xpack.security.transport.ssl.certificate: certs/node.pem
xpack.security.transport.ssl.certificate_authorities: [ "certs/ca.pem" ]
xpack.security.authc.realms.file.file1.order: 0
xpack.security.authc.realms.native.native1.order: 1
xpack.security.authc.realms.pki.pki1.order: 2
xpack.security.authc.realms.pki.pki1.certificate_authorities: [ "certs/ca.pem" ]
YML
  cat >"$ESS_RUN/config/roles.yml" <<'YML'
# The role of the client certificate's user (config/role_mapping.yml).
tributary_cert:
  cluster: [ "all" ]
  indices:
    - names: [ "*" ]
      privileges: [ "all" ]
YML
  cat >"$ESS_RUN/config/role_mapping.yml" <<'YML'
tributary_cert:
  - "CN=tributary-client,O=Tributary"
YML
  # elasticsearch-users writes config/users and config/users_roles (bcrypt hashes).
  env -u JAVA_HOME ES_JAVA_HOME="$TESTENV_JDK" ES_PATH_CONF="$ESS_RUN/config" \
    "$ESS_HOME/bin/elasticsearch-users" useradd "$ESS_USER" -p "$ESS_PASSWORD" -r superuser >&2 ||
    die "elasticsearch-users useradd failed"
  chown -R "$TESTENV_SVC_USER:" "$ESS_RUN"
}

ess_launch() {
  if ! es_launch_node es-secure "$ESS_HOME" "$ESS_RUN/config" "$ESS_PIDFILE" "$ESS_RUN/logs" "-Xms512m -Xmx512m"; then
    die "elasticsearch $ESS_VERSION (secured) failed to start"
  fi
  if ! wait_until 300 "elasticsearch (secured) on $ESS_URL" ess_ready; then
    show_logs "$ESS_RUN/logs/launch.log" "$ESS_RUN/logs/$ESS_CLUSTER.log"
    server_stop graceful 30 || true
    die "elasticsearch $ESS_VERSION (secured) did not become ready"
  fi
}

do_up() { secure_up install_secure_dist ess_launch; }

do_start() { ess_launch; }

describe() { echo "elasticsearch $ESS_VERSION (TLS, security) pid ${SERVER_PID:-?} at $ESS_URL"; }

print_env() { secure_env ES "$ESS_URL" "$ESS_CERTS" "$ESS_USER" "$ESS_PASSWORD" "$ESS_CLIENT_USER"; }

main_dispatch "$@"
