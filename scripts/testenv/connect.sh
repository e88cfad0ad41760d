#!/usr/bin/env bash
# Kafka Connect in distributed mode (one worker) on the test Kafka, with the Debezium PostgreSQL and
# MariaDB source connectors on its plugin path, so tests create and delete connectors through REST:
#   TRIBUTARY_CONNECT_URL=http://127.0.0.1:<CONNECT_PORT>   (POST /connectors, DELETE /connectors/NAME)
# Assembled from Maven Central jars like kafka.sh: connect-runtime + connect-json (+ the log4j2
# binding of its SLF4J 1.x) in dist/connect-<v>/lib, each connector resolved into a plugin
# directory of its own (plugin.path isolation), without the Kafka jars the runtime provides.
#
#   connect.sh up|down|stop|start|restart|status|env  (stop modes: graceful, kill)
#
# Worker: group tributary-connect, its state in the topics tributary-connect-{configs,offsets,status}
# (replication factor 1, one partition) on $KAFKA_PORT; JsonConverter with schemas for keys and
# values; offsets flushed every second. The worker needs Kafka running (testenv starts it after
# kafka, postgres and mariadb); an `up` of a stopped worker is a fresh instance, so it also
# deletes those three topics: no connector nor offset of an earlier instance comes back.
#
# Versions: Connect 4.3.2, not Kafka's 4.4.0: Debezium 3.6.1 is built against Kafka 4.3 and its
# tasks call org.apache.kafka.common.utils.Sanitizer, which 4.4.0 moved to ...utils.internals
# (NoClassDefFoundError). Connect 4.3 talks to the 4.4 broker as any client does.
# debezium-connector-mariadb is 3.5.0.Final: 3.6.1.Final is not served by our Maven proxy, and
# debezium-connector-mysql 3.6.1 refuses MariaDB 10.11 (it sends SHOW BINARY LOG STATUS).
TESTENV_NAME=connect
# shellcheck source=scripts/testenv/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONNECT_VERSION=${TRIBUTARY_CONNECT_VERSION:-4.3.2}
# log4j-core backs Connect's /admin/loggers (it calls log4j2 directly) and, through the SLF4J 1.x
# binding (connect-runtime pins slf4j-api 1.7.36), its log file.
CONNECT_LOG4J_VERSION=${TRIBUTARY_CONNECT_LOG4J_VERSION:-2.25.5}
DEBEZIUM_PG_VERSION=${TRIBUTARY_DEBEZIUM_PG_VERSION:-3.6.1.Final}
DEBEZIUM_MARIADB_VERSION=${TRIBUTARY_DEBEZIUM_MARIADB_VERSION:-3.5.0.Final}
CONNECT_HEAP=${TRIBUTARY_CONNECT_HEAP:-384m}
CONNECT_GROUP=tributary-connect
CONNECT_TOPICS="tributary-connect-configs tributary-connect-offsets tributary-connect-status"
CONNECT_PLUGINS="io.debezium.connector.postgresql.PostgresConnector io.debezium.connector.mariadb.MariaDbConnector"

CONNECT_DIST=$(dist_dir "connect-$CONNECT_VERSION")
PG_PLUGIN_DIST=$(dist_dir "debezium-postgres-$DEBEZIUM_PG_VERSION")
MARIADB_PLUGIN_DIST=$(dist_dir "debezium-mariadb-$DEBEZIUM_MARIADB_VERSION")
CONNECT_RUN=$(run_dir connect)
CONNECT_PID=$CONNECT_RUN/connect.pid
CONNECT_URL=http://127.0.0.1:$CONNECT_PORT
JAVA=$TESTENV_JDK/bin/java

SERVER_RUN=$CONNECT_RUN
SERVER_PIDFILE=$CONNECT_PID
SERVER_PORTS=$CONNECT_PORT

# server_pids: the worker JVM on our worker.properties. graceful = SIGTERM: the worker leaves the
# group and stops its tasks (committing their offsets).
server_pids() { procs_of java org.apache.kafka.connect.cli.ConnectDistributed "$CONNECT_RUN/worker.properties"; }

# kafka_cluster_id prints the cluster id of testenv's Kafka from its storage (nothing while it has none).
kafka_cluster_id() { sed -n 's/^cluster\.id=//p' "$TESTENV_HOME/run/kafka/data/meta.properties" 2>/dev/null || true; }

# probe: the worker on our port works on testenv's Kafka as it is now (GET /: the cluster id; a
# worker whose Kafka was replaced by a fresh instance lost its topics, so it counts as not running
# and up replaces it), is ready (GET /health: joined the group, read its config topic) and lists
# both Debezium connectors (so its plugin path is ours).
probe() {
  local root want plugins p
  root=$(curl -fsS --max-time 5 "$CONNECT_URL/" 2>/dev/null) || return 1
  want=$(kafka_cluster_id)
  [ -z "$want" ] || [[ $root == *"\"kafka_cluster_id\":\"$want\""* ]] || return 1
  curl -fsS --max-time 5 "$CONNECT_URL/health" >/dev/null 2>&1 || return 1
  plugins=$(curl -fsS --max-time 5 "$CONNECT_URL/connector-plugins" 2>/dev/null) || return 1
  for p in $CONNECT_PLUGINS; do [[ $plugins == *"\"class\":\"$p\""* ]] || return 1; done
}

setup_key() {
  echo "connect $CONNECT_VERSION port $CONNECT_PORT kafka $KAFKA_PORT debezium-postgres $DEBEZIUM_PG_VERSION debezium-mariadb $DEBEZIUM_MARIADB_VERSION"
}

# mvn_resolve DIR WHAT resolves the runtime dependencies of DIR/pom.xml into DIR/lib.
mvn_resolve() {
  local dir=$1 what=$2 mvnlog
  mvnlog=$(dl_dir connect)/mvn-$(basename "$dir").log
  if ! (cd "$dir" && JAVA_HOME=$TESTENV_JDK mvn_locked -q "$TESTENV_MDP:copy-dependencies" \
    -DoutputDirectory=lib -DincludeScope=runtime) >"$mvnlog" 2>&1; then
    show_logs "$mvnlog"
    die "maven could not resolve $what"
  fi
}

# install_runtime resolves the worker's classpath once into $CONNECT_DIST/lib; the .complete
# marker is written last, so an interrupted install is redone.
install_runtime() {
  [ -f "$CONNECT_DIST/.complete" ] && return 0
  apt_ensure "$JAVA" openjdk-17-jre-headless
  apt_ensure "$TESTENV_JDK/bin/javac" openjdk-17-jdk-headless
  apt_ensure mvn maven
  log "resolving connect-runtime:$CONNECT_VERSION classpath from Maven Central into $CONNECT_DIST"
  rm -rf "$CONNECT_DIST"
  mkdir -p "$CONNECT_DIST/tools"
  cat >"$CONNECT_DIST/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.tributary.testenv</groupId>
  <artifactId>connect-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-runtime</artifactId>
      <version>$CONNECT_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-json</artifactId>
      <version>$CONNECT_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>$CONNECT_LOG4J_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
  mvn_resolve "$CONNECT_DIST" "the Kafka Connect classpath"
  local jar
  for jar in "connect-runtime-$CONNECT_VERSION.jar" "connect-json-$CONNECT_VERSION.jar" "kafka-clients-$CONNECT_VERSION.jar" \
    "log4j-core-$CONNECT_LOG4J_VERSION.jar" "log4j-slf4j-impl-$CONNECT_LOG4J_VERSION.jar"; do
    [ -f "$CONNECT_DIST/lib/$jar" ] || die "resolved classpath lacks $jar (ls $CONNECT_DIST/lib)"
  done
  [ "$(find "$CONNECT_DIST/lib" -name 'slf4j-api-*.jar' | wc -l)" = 1 ] || die "more than one slf4j-api on the classpath"
  touch "$CONNECT_DIST/.complete"
}

# build_reset_topics compiles the topic reset helper into $CONNECT_DIST/tools whenever its source
# differs from the one compiled there (an install made by an older script gets the new helper).
# ResetTopics deletes the worker's topics for a fresh instance (the Kafka distribution of kafka.sh
# has no kafka-topics tool, and this saves resolving kafka-tools). A broker that has just started
# may not answer an admin request for a while on a loaded machine: every request is retried until
# the helper's own deadline (120 s).
build_reset_topics() {
  local src=$CONNECT_DIST/tools/ResetTopics.java new
  new=$(cat <<'JAVA'
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.*;

/** ResetTopics BOOTSTRAP TOPIC... deletes those of the topics that exist and waits until they are gone. */
public class ResetTopics {
  public static void main(String[] args) throws Exception {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
    List<String> want = Arrays.asList(args).subList(1, args.length);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    try (Admin admin = Admin.create(p)) {
      Set<String> asked = new TreeSet<>();
      while (true) {
        try {
          Set<String> left = new TreeSet<>(admin.listTopics().names().get(20, TimeUnit.SECONDS));
          left.retainAll(want);
          if (left.isEmpty()) return;
          Set<String> ask = new TreeSet<>(left);
          ask.removeAll(asked);
          if (!ask.isEmpty()) {
            System.out.println("deleting " + ask);
            admin.deleteTopics(ask).all().get(20, TimeUnit.SECONDS);
            asked.addAll(ask);
          }
          if (System.nanoTime() > deadline) throw new IllegalStateException("still listed after 120 s: " + left);
        } catch (TimeoutException | ExecutionException e) {
          // not answered yet, or a topic already gone: ask again (what is left) until the deadline
          if (System.nanoTime() > deadline) throw e;
          System.out.println("retrying: " + e);
          asked.clear();
        }
        Thread.sleep(250);
      }
    }
  }
}
JAVA
)
  if [ -f "$CONNECT_DIST/tools/ResetTopics.class" ] && [ "$(cat "$src" 2>/dev/null)" = "$new" ]; then
    return 0
  fi
  apt_ensure "$TESTENV_JDK/bin/javac" openjdk-17-jdk-headless
  mkdir -p "$CONNECT_DIST/tools"
  printf '%s\n' "$new" >"$src"
  rm -f "$CONNECT_DIST/tools/ResetTopics.class"
  "$TESTENV_JDK/bin/javac" -nowarn -d "$CONNECT_DIST/tools" -cp "$CONNECT_DIST/lib/kafka-clients-$CONNECT_VERSION.jar" \
    "$src" || die "compiling ResetTopics failed"
}

# install_plugin DIST GROUP:ARTIFACT:VERSION CLASS resolves one connector and its dependencies into
# DIST/plugins/ARTIFACT, the directory plugin.path names DIST/plugins for. Excluded, because the
# worker provides them: the Kafka and SLF4J jars its POM pulls (Debezium's connect-api and
# kafka-clients 4.x with their compression libraries; Connect never loads those packages from a
# plugin anyway) and jackson-core/databind/annotations. A plugin-local Jackson is loaded in
# isolation while the worker's JsonConverter links to the worker's, so Debezium's
# CloudEventsConverter fails its static init (NoSuchMethodException for
# JsonConverter.convertToConnect(Schema, JsonNode)), logged as an ERROR at every start.
install_plugin() {
  local dist=$1 coords=$2 class=$3 g a v
  IFS=: read -r g a v <<<"$coords"
  [ -f "$dist/.complete" ] && return 0
  apt_ensure mvn maven
  apt_ensure unzip unzip
  log "resolving $coords into $dist"
  rm -rf "$dist"
  mkdir -p "$dist/plugins"
  cat >"$dist/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.tributary.testenv</groupId>
  <artifactId>$a-plugin</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>$g</groupId>
      <artifactId>$a</artifactId>
      <version>$v</version>
      <exclusions>
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>org.slf4j</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>com.fasterxml.jackson.core</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
  </dependencies>
</project>
POM
  mvn_resolve "$dist" "$coords"
  mv "$dist/lib" "$dist/plugins/$a"
  [ -f "$dist/plugins/$a/$a-$v.jar" ] || die "$coords resolved without its own jar (ls $dist/plugins/$a)"
  if find "$dist/plugins/$a" -name 'kafka-clients-*.jar' -o -name 'connect-api-*.jar' -o -name 'slf4j-api-*.jar' \
    -o -name 'jackson-databind-*.jar' | grep . >&2; then
    die "the $a plugin still carries jars the worker provides"
  fi
  # The worker finds plugins by their ServiceLoader manifests (plugin.discovery=service_load).
  unzip -p "$dist/plugins/$a/$a-$v.jar" META-INF/services/org.apache.kafka.connect.source.SourceConnector |
    grep -x "$class" >/dev/null || die "$a-$v.jar does not declare $class in its service manifest"
  touch "$dist/.complete"
}

install_connect() {
  install_runtime
  build_reset_topics
  install_plugin "$PG_PLUGIN_DIST" "io.debezium:debezium-connector-postgres:$DEBEZIUM_PG_VERSION" \
    io.debezium.connector.postgresql.PostgresConnector
  install_plugin "$MARIADB_PLUGIN_DIST" "io.debezium:debezium-connector-mariadb:$DEBEZIUM_MARIADB_VERSION" \
    io.debezium.connector.mariadb.MariaDbConnector
}

# kafka_up succeeds when testenv's Kafka runs and answers.
kafka_up() { bash "$TESTENV_SCRIPTS/kafka.sh" status; }

need_kafka() {
  wait_until 30 "Kafka on 127.0.0.1:$KAFKA_PORT" kafka_up ||
    die "Kafka does not run on 127.0.0.1:$KAFKA_PORT: the worker needs it (scripts/testenv/testenv up kafka)"
}

write_config() {
  # plugin.discovery=service_load: no class scanning of every plugin jar (seconds of CPU on 2
  # cores); Debezium's jars declare their connectors in ServiceLoader manifests.
  # scheduled.rebalance.max.delay.ms: a lost worker's connectors are reassigned after 1 s, not 5 min.
  cat >"$CONNECT_RUN/worker.properties" <<PROPS
bootstrap.servers=127.0.0.1:$KAFKA_PORT
group.id=$CONNECT_GROUP
config.storage.topic=tributary-connect-configs
offset.storage.topic=tributary-connect-offsets
status.storage.topic=tributary-connect-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
offset.storage.partitions=1
status.storage.partitions=1
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
offset.flush.interval.ms=1000
scheduled.rebalance.max.delay.ms=1000
listeners=http://127.0.0.1:$CONNECT_PORT
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$CONNECT_PORT
rest.advertised.listener=http
plugin.path=$PG_PLUGIN_DIST/plugins,$MARIADB_PLUGIN_DIST/plugins
plugin.discovery=service_load
PROPS
  cat >"$CONNECT_RUN/log4j2.properties" <<L4J
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $CONNECT_RUN/logs/connect.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %X{connector.context}%m (%c:%L)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
L4J
}

# reset_topics deletes the worker's topics on Kafka (a fresh instance starts with no connector).
reset_topics() {
  # shellcheck disable=SC2086 # one topic per word
  if ! "$JAVA" -Xmx64m -cp "$CONNECT_DIST/tools:$CONNECT_DIST/lib/*" \
    -Dlog4j2.configurationFile="file:$CONNECT_RUN/log4j2-tools.properties" \
    ResetTopics "127.0.0.1:$KAFKA_PORT" $CONNECT_TOPICS >"$CONNECT_RUN/logs/reset-topics.log" 2>&1; then
    show_logs "$CONNECT_RUN/logs/reset-topics.log"
    die "could not delete the topics of an earlier Connect instance: $CONNECT_TOPICS"
  fi
  local line
  line=$(grep '^deleting' "$CONNECT_RUN/logs/reset-topics.log" || true)
  [ -z "$line" ] || log "fresh instance: $line (left by an earlier worker)"
}

do_up() {
  install_connect
  need_kafka
  # A live worker that no longer answers is a hung one: stop it before wiping its directory.
  stop_leftover
  wait_until 20 "port $CONNECT_PORT to be free" port_free "$CONNECT_PORT" || die "127.0.0.1:$CONNECT_PORT is taken by another process (set TRIBUTARY_CONNECT_PORT)"
  rm -rf "$CONNECT_RUN"
  CONNECT_RUN=$(run_dir connect)
  mkdir -p "$CONNECT_RUN/logs"
  write_config
  cat >"$CONNECT_RUN/log4j2-tools.properties" <<L4J
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = OUT
L4J
  echo "$CONNECT_VERSION" >"$CONNECT_RUN/version"
  reset_topics
  connect_launch
}

# ready_or_dead stops the readiness wait early when the JVM has exited.
ready_or_dead() { ! proc_alive "$CONNECT_STARTED" || probe; }

# connect_launch starts the worker on the config in run/ and waits until it is ready (joined its
# group, read its config topic, plugins loaded).
connect_launch() {
  local jopts=(-Xms"$CONNECT_HEAP" -Xmx"$CONNECT_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true
    -Dlog4j2.configurationFile="file:$CONNECT_RUN/log4j2.properties" -Dkafka.logs.dir="$CONNECT_RUN/logs")
  log "starting Kafka Connect $CONNECT_VERSION (distributed, group $CONNECT_GROUP) on $CONNECT_URL, Kafka 127.0.0.1:$KAFKA_PORT"
  rm -f "$CONNECT_PID"
  # As kafka.sh: setsid detaches the worker; the inner shell writes its pid, then becomes the JVM.
  # shellcheck disable=SC2016 # expanded by the inner bash
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$CONNECT_PID" \
    "$JAVA" "${jopts[@]}" -cp "$CONNECT_DIST/lib/*" org.apache.kafka.connect.cli.ConnectDistributed \
    "$CONNECT_RUN/worker.properties" </dev/null >>"$CONNECT_RUN/logs/stdout.log" 2>&1 &
  local i
  for ((i = 0; i < 20; i++)); do [ -s "$CONNECT_PID" ] && break; sleep 0.1; done
  CONNECT_STARTED=$(cat "$CONNECT_PID" 2>/dev/null) || die "the worker's launcher wrote no pid file"

  if ! wait_until 180 "a ready worker at $CONNECT_URL" ready_or_dead || ! proc_alive "$CONNECT_STARTED" || ! probe; then
    proc_alive "$CONNECT_STARTED" || log "the Connect JVM exited during start-up"
    show_logs "$CONNECT_RUN/logs/stdout.log" "$CONNECT_RUN/logs/connect.log"
    server_stop kill 10 || true
    die "Kafka Connect did not become ready"
  fi
}

do_start() {
  need_kafka
  connect_launch
}

describe() {
  local v
  v=$(cat "$CONNECT_RUN/version" 2>/dev/null || echo "$CONNECT_VERSION")
  echo "Kafka Connect $v (distributed, group $CONNECT_GROUP) pid ${SERVER_PID:-?} at $CONNECT_URL, Debezium postgres $DEBEZIUM_PG_VERSION mariadb $DEBEZIUM_MARIADB_VERSION"
}

print_env() {
  echo "export TRIBUTARY_CONNECT_URL=$CONNECT_URL"
}

main_dispatch "$@"
