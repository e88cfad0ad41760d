#!/usr/bin/env bash
# Kafka 4.x in KRaft combined mode (one JVM is both broker and controller), assembled from the
# Maven Central jars: kafka_2.13 brings the whole server classpath through its POM except the SLF4J
# binding, which is added here so the broker logs through log4j2 into a file.
#
#   kafka.sh up|down|stop|start|restart|status|env  (stop modes: graceful, kill)
#
# Version choice: 4.4.0 is the newest 4.x on Central; every server jar of it is Java 17 bytecode
# (class version 61; kafka-clients is 55), so it runs on the Debian OpenJDK 17 in $TESTENV_JDK.
# The log4j version must match the log4j-core that kafka-server's POM pulls (2.25.5 for 4.4.0), and
# the binding is the SLF4J 1.x one because the POM pins slf4j-api 1.7.36.
TESTENV_NAME=kafka
# shellcheck source=scripts/testenv/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KAFKA_VERSION=${TRIBUTARY_KAFKA_VERSION:-4.4.0}
KAFKA_LOG4J_VERSION=${TRIBUTARY_KAFKA_LOG4J_VERSION:-2.25.5}
KAFKA_HEAP=${TRIBUTARY_KAFKA_HEAP:-512m}

KAFKA_DIST=$(dist_dir "kafka-$KAFKA_VERSION")
KAFKA_RUN=$(run_dir kafka)
KAFKA_PID=$KAFKA_RUN/kafka.pid
JAVA=$TESTENV_JDK/bin/java

SERVER_RUN=$KAFKA_RUN
SERVER_PIDFILE=$KAFKA_PID
SERVER_PORTS="$KAFKA_PORT $KAFKA_CONTROLLER_PORT"

# server_pids: the broker JVM on our server.properties (the storage tool names it too, with
# another main class). graceful = SIGTERM, a controlled shutdown.
server_pids() { procs_of java kafka.Kafka "$KAFKA_RUN/server.properties"; }

probe() { kafka_metadata_ok 3; }

setup_key() { echo "kafka $KAFKA_VERSION port $KAFKA_PORT controller $KAFKA_CONTROLLER_PORT"; }

# install_kafka resolves the runtime classpath once into $KAFKA_DIST/lib (Maven keeps the jars in
# ~/.m2 too). The .complete marker is written last, so an interrupted resolve is redone.
install_kafka() {
  [ -f "$KAFKA_DIST/.complete" ] && return 0
  apt_ensure "$JAVA" openjdk-17-jre-headless
  apt_ensure unzip unzip
  apt_ensure mvn maven
  log "resolving kafka_2.13:$KAFKA_VERSION classpath from Maven Central into $KAFKA_DIST"
  rm -rf "$KAFKA_DIST"
  mkdir -p "$KAFKA_DIST"
  cat >"$KAFKA_DIST/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.tributary.testenv</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$KAFKA_LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
  local mvnlog
  mvnlog=$(dl_dir kafka)/mvn-$KAFKA_VERSION.log
  if ! (cd "$KAFKA_DIST" && JAVA_HOME=$TESTENV_JDK mvn_locked -q "$TESTENV_MDP:copy-dependencies" \
    -DoutputDirectory=lib -DincludeScope=runtime) >"$mvnlog" 2>&1; then
    show_logs "$mvnlog"
    die "maven could not resolve the Kafka classpath"
  fi
  # Fail here rather than at start-up when the classpath is not what the start command expects.
  local jar
  for jar in "kafka_2.13-$KAFKA_VERSION.jar" "kafka-server-$KAFKA_VERSION.jar" "log4j-core-$KAFKA_LOG4J_VERSION.jar" \
    "log4j-slf4j-impl-$KAFKA_LOG4J_VERSION.jar"; do
    [ -f "$KAFKA_DIST/lib/$jar" ] || die "resolved classpath lacks $jar (ls $KAFKA_DIST/lib)"
  done
  [ "$(find "$KAFKA_DIST/lib" -name 'slf4j-api-*.jar' | wc -l)" = 1 ] || die "more than one slf4j-api on the classpath"
  # grep without -q: an early exit would SIGPIPE unzip and fail the pipeline under pipefail.
  unzip -Z1 "$KAFKA_DIST/lib/kafka_2.13-$KAFKA_VERSION.jar" | grep -x 'kafka/tools/StorageTool.class' >/dev/null ||
    die "kafka.tools.StorageTool is not in kafka_2.13-$KAFKA_VERSION.jar"
  touch "$KAFKA_DIST/.complete"
}

# new_cluster_id prints a random Kafka UUID (16 bytes, URL-safe base64 without padding), saving the
# JVM start that `StorageTool random-uuid` would cost. Kafka never hands out ids that start with
# '-' (they look like command-line flags), so neither do we.
new_cluster_id() {
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [ "${id#-}" = "$id" ] && { printf '%s\n' "$id"; return 0; }
  done
}

# kafka_metadata_ok [SECONDS] sends a real Metadata request (v4: pre-"flexible" encoding, so the
# bytes stay simple, and served by every broker since 0.11; asking for no topics) and succeeds when the answer carries our correlation id and lists a broker
# advertised on our port. A broker answers Metadata only once it has registered with the
# controller and is serving clients, so this is the readiness signal, not just an open socket.
kafka_metadata_ok() {
  # shellcheck disable=SC2016 # the script is expanded by the inner bash
  timeout "${1:-3}" bash -c '
    set -eu
    exec 3<>"/dev/tcp/127.0.0.1/$1"
    # size 22 | api_key 3 | api_version 4 | correlation id 0x00007e57 | client id "testenv" | topics [] | no auto-create
    printf "\x00\x00\x00\x16\x00\x03\x00\x04\x00\x00\x7e\x57\x00\x07testenv\x00\x00\x00\x00\x00" >&3
    size=$(dd bs=1 count=4 status=none <&3 | od -An -tu4 --endian=big | tr -d " ")
    [ -n "$size" ] && [ "$size" -ge 16 ] && [ "$size" -le 65536 ]
    b=($(dd bs=1 count="$size" status=none <&3 | od -An -tu1 -v))
    [ "${#b[@]}" -eq "$size" ]
    [ "${b[0]} ${b[1]} ${b[2]} ${b[3]}" = "0 0 126 87" ]
    brokers=$(( (b[8] << 24) | (b[9] << 16) | (b[10] << 8) | b[11] ))
    [ "$brokers" -ge 1 ]
    hostlen=$(( (b[16] << 8) | b[17] ))
    p=$(( 18 + hostlen ))
    port=$(( (b[p] << 24) | (b[p+1] << 16) | (b[p+2] << 8) | b[p+3] ))
    [ "$port" -eq "$1" ]
  ' _ "$KAFKA_PORT" 2>/dev/null
}

# ready_or_dead stops the readiness wait early when the JVM has exited.
ready_or_dead() { ! proc_alive "$KAFKA_STARTED" || kafka_metadata_ok 2; }

write_config() {
  cat >"$KAFKA_RUN/server.properties" <<PROPS
# Single node: this process is the only broker and the only (dynamic-quorum) controller voter.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_RUN/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
# Internal topics must fit one broker; one offsets partition keeps the first group join quick on 2 cores.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1
group.initial.rebalance.delay.ms=0
PROPS
  # The storage tool logs to the console (captured in format.log), not into the broker's server.log.
  cat >"$KAFKA_RUN/log4j2-tools.properties" <<L4J
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = OUT
L4J
  cat >"$KAFKA_RUN/log4j2.properties" <<L4J
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $KAFKA_RUN/logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
L4J
}

do_up() {
  install_kafka
  # A live broker that no longer answers is a hung one: stop it before wiping its directory.
  stop_leftover
  wait_until 20 "port $KAFKA_PORT to be free" port_free "$KAFKA_PORT" || die "127.0.0.1:$KAFKA_PORT is taken by another process"
  wait_until 20 "port $KAFKA_CONTROLLER_PORT to be free" port_free "$KAFKA_CONTROLLER_PORT" || die "127.0.0.1:$KAFKA_CONTROLLER_PORT is taken by another process"
  rm -rf "$KAFKA_RUN"
  KAFKA_RUN=$(run_dir kafka)
  mkdir -p "$KAFKA_RUN/data" "$KAFKA_RUN/logs"
  write_config
  echo "$KAFKA_VERSION" >"$KAFKA_RUN/version"

  # --standalone writes the bootstrap voter set (just this node) that controller.quorum.bootstrap.servers needs.
  if ! "$JAVA" -Xmx256m -Dlog4j2.configurationFile="file:$KAFKA_RUN/log4j2-tools.properties" -cp "$KAFKA_DIST/lib/*" \
    kafka.tools.StorageTool format --standalone -t "$(new_cluster_id)" -c "$KAFKA_RUN/server.properties" \
    >"$KAFKA_RUN/logs/format.log" 2>&1; then
    show_logs "$KAFKA_RUN/logs/format.log"
    die "formatting the KRaft storage failed"
  fi
  kafka_launch
}

# kafka_launch starts the broker on the formatted storage in run/ and waits until it answers
# Metadata; after a kill the broker first recovers its logs.
kafka_launch() {
  local jopts=(-Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
    -Dlog4j2.configurationFile="file:$KAFKA_RUN/log4j2.properties" -Dkafka.logs.dir="$KAFKA_RUN/logs")
  log "starting Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (controller $KAFKA_CONTROLLER_PORT)"
  rm -f "$KAFKA_PID"
  # setsid detaches the broker from the caller's session; the inner shell records its own pid and then
  # becomes the JVM, so the pid file names the java process whatever setsid does about forking.
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$KAFKA_PID" \
    "$JAVA" "${jopts[@]}" -cp "$KAFKA_DIST/lib/*" kafka.Kafka "$KAFKA_RUN/server.properties" \
    </dev/null >>"$KAFKA_RUN/logs/stdout.log" 2>&1 &
  local i
  for ((i = 0; i < 20; i++)); do [ -s "$KAFKA_PID" ] && break; sleep 0.1; done
  KAFKA_STARTED=$(cat "$KAFKA_PID" 2>/dev/null) || die "the broker's launcher wrote no pid file"

  if ! wait_until 120 "a Metadata answer from 127.0.0.1:$KAFKA_PORT" ready_or_dead ||
    ! proc_alive "$KAFKA_STARTED" || ! kafka_metadata_ok 3; then
    proc_alive "$KAFKA_STARTED" || log "the Kafka JVM exited during start-up"
    show_logs "$KAFKA_RUN/logs/stdout.log" "$KAFKA_RUN/logs/server.log"
    server_stop kill 10 || true
    die "Kafka did not become ready"
  fi
}

do_start() { kafka_launch; }

describe() {
  local v
  v=$(cat "$KAFKA_RUN/version" 2>/dev/null || echo "$KAFKA_VERSION")
  echo "Kafka $v (KRaft broker+controller) pid ${SERVER_PID:-?} at 127.0.0.1:$KAFKA_PORT, controller 127.0.0.1:$KAFKA_CONTROLLER_PORT"
}

print_env() {
  echo "export TRIBUTARY_KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT"
}

main_dispatch "$@"
