#!/usr/bin/env bash
# OpenSearch 2.19 single node with the opensearch-security plugin, as production runs it, for the
# tests of TLS, users, roles and client certificates.
#
# The plugin is on Maven Central at 2.19.4.0 (not at 2.19.6.0, the version opensearch.sh runs), so
# this node runs OpenSearch 2.19.4: its integ-test zip, the mapper-extras module (as opensearch.sh
# adds it) and the plugin, installed into a distribution of its own, dist/opensearch-2.19.4-secure.
#
# Set up on every fresh instance (run/os-secure/config/certs, made with openssl): a CA, the node's
# certificate (SAN 127.0.0.1 and localhost) for TLS on HTTP and transport, an admin certificate
# (plugins.security.authcz.admin_dn, for securityadmin.sh) and a client certificate. The security
# index is initialised from config/opensearch-security at the first start
# (allow_default_init_securityindex). Authentication domains, in order: HTTP basic against the
# internal users (tributary-admin, mapped to all_access, which may use the _plugins/_security REST
# API to create roles and users at run time), then client certificates (clientauth_mode OPTIONAL):
# one signed by the CA authenticates as its CN, tributary-client, mapped to the role tributary_cert
# (cluster_all and cluster_composite_ops, indices_all on every index: every right). A basic-auth
# header wins over a client certificate.
# action.auto_create_index is left unset: a stock cluster.
TESTENV_NAME=os-secure
# shellcheck source=scripts/testenv/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OSS_VERSION=${TRIBUTARY_OPENSEARCH_SECURE_VERSION:-2.19.4}
OSS_PLUGIN_VERSION=$OSS_VERSION.0
OSS_HOME=$(dist_dir "opensearch-$OSS_VERSION-secure")
OSS_RUN=$(run_dir os-secure)
OSS_PIDFILE=$OSS_RUN/opensearch.pid
OSS_URL=https://127.0.0.1:$OS_SECURE_HTTP_PORT
OSS_CLUSTER=tributary-os-secure
OSS_CERTS=$OSS_RUN/config/certs
OSS_USER=tributary-admin
OSS_PASSWORD=tributary-os-admin-secret
OSS_CLIENT_USER=tributary-client

SERVER_RUN=$OSS_RUN
SERVER_PIDFILE=$OSS_PIDFILE
SERVER_PORTS="$OS_SECURE_HTTP_PORT $OS_SECURE_TRANSPORT_PORT"

server_pids() { procs_of java "-Dopensearch.path.conf=$OSS_RUN/config"; }

probe() { secure_ours "$OSS_URL" "$OSS_CLUSTER" "$OSS_CERTS/ca.pem" "$OSS_USER" "$OSS_PASSWORD"; }
oss_ready() { secure_ours "$OSS_URL" "$OSS_CLUSTER" "$OSS_CERTS/ca.pem" "$OSS_USER" "$OSS_PASSWORD" yellow; }

setup_key() { echo "os-secure $OSS_VERSION http $OS_SECURE_HTTP_PORT transport $OS_SECURE_TRANSPORT_PORT"; }

install_oss() {
  [ -f "$OSS_HOME/plugins/opensearch-security/plugin-descriptor.properties" ] && return 0
  apt_ensure mvn maven
  apt_ensure unzip unzip
  local dl stage home
  dl=$(dl_dir opensearch)
  [ -f "$dl/opensearch-$OSS_VERSION.zip" ] ||
    mvn_fetch "org.opensearch.distribution.integ-test-zip:opensearch:$OSS_VERSION:zip" "$dl"
  [ -f "$dl/opensearch-security-$OSS_PLUGIN_VERSION.zip" ] ||
    mvn_fetch "org.opensearch.plugin:opensearch-security:$OSS_PLUGIN_VERSION:zip" "$dl"
  # Assemble beside the final place and rename, so an interrupted install never leaves a half
  # distribution that a later run would take as complete.
  stage=$(mktemp -d "$TESTENV_HOME/dist/.opensearch-$OSS_VERSION-secure.XXXXXX")
  unzip -q "$dl/opensearch-$OSS_VERSION.zip" -d "$stage"
  home=$stage/opensearch-$OSS_VERSION
  add_mapper_extras "$home" "$OSS_VERSION"
  chmod +x "$home"/bin/*
  OPENSEARCH_JAVA_HOME="$TESTENV_JDK" JAVA_HOME="$TESTENV_JDK" \
    "$home/bin/opensearch-plugin" install --batch "file://$dl/opensearch-security-$OSS_PLUGIN_VERSION.zip" >&2 ||
    die "installing opensearch-security $OSS_PLUGIN_VERSION failed"
  chmod -R a+rX "$home"
  chmod +x "$home"/plugins/opensearch-security/tools/*.sh
  rm -rf "$OSS_HOME"
  mv "$home" "$OSS_HOME"
  rm -rf "$stage"
  log "installed modules $(cd "$OSS_HOME/modules" && echo *), plugins $(cd "$OSS_HOME/plugins" && echo *)"
}

# admin_hash prints the bcrypt hash of the admin's password (the plugin's own tool).
admin_hash() {
  OPENSEARCH_JAVA_HOME="$TESTENV_JDK" JAVA_HOME="$TESTENV_JDK" \
    bash "$OSS_HOME/plugins/opensearch-security/tools/hash.sh" -p "$OSS_PASSWORD" 2>/dev/null | grep -E '^\$2[aby]\$' | tail -n 1
}

write_config() {
  local hash sec
  rm -rf "$OSS_RUN"
  mkdir -p "$OSS_RUN/data" "$OSS_RUN/logs"
  os_run_config "$OSS_HOME" "$OSS_RUN"
  make_test_pki "$OSS_CERTS"
  hash=$(admin_hash)
  [ -n "$hash" ] || die "the security plugin's hash.sh printed no hash"
  cat >"$OSS_RUN/config/opensearch.yml" <<YML
cluster.name: $OSS_CLUSTER
node.name: os-secure-1
discovery.type: single-node
network.host: 127.0.0.1
http.port: $OS_SECURE_HTTP_PORT
transport.port: $OS_SECURE_TRANSPORT_PORT
path.data: $OSS_RUN/data
path.logs: $OSS_RUN/logs
cluster.routing.allocation.disk.threshold_enabled: false
plugins.security.ssl.transport.pemcert_filepath: certs/node.pem
plugins.security.ssl.transport.pemkey_filepath: certs/node.key
plugins.security.ssl.transport.pemtrustedcas_filepath: certs/ca.pem
plugins.security.ssl.transport.enforce_hostname_verification: false
plugins.security.ssl.http.enabled: true
plugins.security.ssl.http.pemcert_filepath: certs/node.pem
plugins.security.ssl.http.pemkey_filepath: certs/node.key
plugins.security.ssl.http.pemtrustedcas_filepath: certs/ca.pem
plugins.security.ssl.http.clientauth_mode: OPTIONAL
plugins.security.allow_default_init_securityindex: true
plugins.security.authcz.admin_dn: [ "CN=tributary-admin,O=Tributary" ]
plugins.security.nodes_dn: [ "CN=tributary-node,O=Tributary" ]
plugins.security.restapi.roles_enabled: [ "all_access" ]
# No audit log: its default sink is missing here, and its INFO lines would bury the node's own.
plugins.security.audit.type: noop
logger.org.opensearch.security.auditlog: warn
YML
  sec=$OSS_RUN/config/opensearch-security
  cat >"$sec/config.yml" <<'YML'
_meta:
  type: "config"
  config_version: 2
config:
  dynamic:
    http:
      anonymous_auth_enabled: false
    authc:
      basic_internal_auth_domain:
        description: "HTTP basic against the internal users"
        http_enabled: true
        transport_enabled: true
        order: 0
        http_authenticator:
          type: basic
          # A challenging basic authenticator answers 401 at once to a request without an
          # Authorization header: the client certificate domain after it would never be asked.
          challenge: false
        authentication_backend:
          type: intern
      clientcert_auth_domain:
        description: "TLS client certificates: the CN is the user"
        http_enabled: true
        transport_enabled: false
        order: 1
        http_authenticator:
          type: clientcert
          challenge: false
          config:
            username_attribute: cn
        authentication_backend:
          type: noop
YML
  cat >"$sec/internal_users.yml" <<YML
_meta:
  type: "internalusers"
  config_version: 2
$OSS_USER:
  hash: "$hash"
  reserved: true
  backend_roles: [ "admin" ]
  description: "the tests' admin (all_access)"
YML
  cat >>"$sec/roles.yml" <<'YML'

# The role of the client certificate's user (roles_mapping.yml): every right. OpenSearch checks
# _bulk and _mget as cluster-level actions (indices:data/write/bulk, indices:data/read/mget),
# which cluster_all (cluster:*) does not cover: cluster_composite_ops does.
tributary_cert:
  reserved: false
  cluster_permissions: [ "cluster_all", "cluster_composite_ops" ]
  index_permissions:
    - index_patterns: [ "*" ]
      allowed_actions: [ "indices_all" ]
YML
  cat >"$sec/roles_mapping.yml" <<YML
_meta:
  type: "rolesmapping"
  config_version: 2
all_access:
  reserved: false
  backend_roles: [ "admin" ]
  users: [ "$OSS_USER" ]
tributary_cert:
  reserved: false
  users: [ "$OSS_CLIENT_USER" ]
YML
  chown -R "$TESTENV_SVC_USER:" "$OSS_RUN"
}

# oss_launch starts the node on the config and data in run/ and waits until it is yellow (which
# needs the security index initialised: until then every request is refused).
oss_launch() {
  rm -f "$OSS_PIDFILE"
  runuser -u "$TESTENV_SVC_USER" -- env \
    OPENSEARCH_JAVA_HOME="$TESTENV_JDK" JAVA_HOME="$TESTENV_JDK" \
    OPENSEARCH_PATH_CONF="$OSS_RUN/config" OPENSEARCH_JAVA_OPTS="-Xms512m -Xmx512m" \
    "$OSS_HOME/bin/opensearch" -q -p "$OSS_PIDFILE" </dev/null >>"$OSS_RUN/logs/launch.log" 2>&1 &
  OSS_LAUNCHER=$!
  if ! wait_until 360 "opensearch (secured) on $OSS_URL" oss_ready_or_gone || ! oss_ready; then
    show_logs "$OSS_RUN/logs/launch.log" "$OSS_RUN/logs/$OSS_CLUSTER.log"
    server_stop graceful 30 || true
    kill -TERM "$OSS_LAUNCHER" 2>/dev/null || true
    die "opensearch $OSS_VERSION (secured) did not start"
  fi
  oss_cert_role
}

oss_ready_or_gone() { oss_ready || ! proc_alive "$OSS_LAUNCHER"; }

# oss_cert_role puts the certificate user's role (roles.yml's tributary_cert) through the REST
# API: the files apply only when the security index is first initialised, so a run dir set up
# by an older version of this script gets the role's current rights at its next start. A
# failure is only logged: the role then stays as it was.
oss_cert_role() {
  local body='{"cluster_permissions":["cluster_all","cluster_composite_ops"],"index_permissions":[{"index_patterns":["*"],"allowed_actions":["indices_all"]}]}'
  local try
  for try in 1 2 3 4 5; do
    curl -fsS --max-time 60 --cacert "$OSS_CERTS/ca.pem" -u "$OSS_USER:$OSS_PASSWORD" -X PUT \
      -H 'Content-Type: application/json' "$OSS_URL/_plugins/_security/api/roles/tributary_cert" -d "$body" >/dev/null 2>&1 && return 0
    sleep 1
  done
  log "warning: could not update the role tributary_cert; the client certificate's user keeps its former rights"
}

do_up() { secure_up install_oss oss_launch; }

do_start() { oss_launch; }

describe() { echo "opensearch $OSS_VERSION + security $OSS_PLUGIN_VERSION (TLS) pid ${SERVER_PID:-?} at $OSS_URL"; }

print_env() { secure_env OPENSEARCH "$OSS_URL" "$OSS_CERTS" "$OSS_USER" "$OSS_PASSWORD" "$OSS_CLIENT_USER"; }

main_dispatch "$@"
