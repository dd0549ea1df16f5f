#!/usr/bin/env bash
# A/B of two builds under Kafka's produce and catch-up fetch, taking turns (old, new, old,
# new) on a fresh `shale serve --kafka` each time: `shale-kafka-bench` (librdkafka,
# acks=all, not idempotent, 1 KiB records, batches up to 4 MiB, at most 5 MiB awaiting
# acks) producing for 10 s to each partition count, then reading everything back.
#
#   bench/kafka-ab.sh OLD_RELEASE_DIR NEW_RELEASE_DIR [ROUNDS] [PARTITION_COUNTS] [DELAY]
#   e.g. bench/kafka-ab.sh /tmp/old target/release 2 "1 16" 0ms
# Each directory holds `shale` and `shale-kafka-bench`. One line per run: round, build,
# partitions, produce MiB/s, ack p50 and server CPU s per GiB produced, catch-up MiB/s,
# server and client CPU s per GiB read, store GETs per GiB read.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2 ROUNDS=${3:-2} SHAPES=${4:-1 16} DELAY=${5:-0ms}
source bench/lib.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for round in $(seq "$ROUNDS"); do
  for partitions in $SHAPES; do
    for build in "old:$OLD" "new:$NEW"; do
      name=${build%%:*} dir=${build#*:}
      serve_kafka "$work" "$DELAY" "$dir/shale"
      result=$("$dir/shale-kafka-bench" --bootstrap 127.0.0.1:18492 --metrics-url http://127.0.0.1:18480 \
        --server-pid "$pid" --partitions "$partitions" --seconds 10 --in-flight 5120 --batch-bytes 4194304 \
        --idempotence false)
      echo "round $round $name partitions=$partitions $(echo "$result" | python3 -c '
import json, sys
d = json.load(sys.stdin); p, c = d["produce"], d["catch_up"]
print("produce %.1f MiB/s ack p50 %.1f ms server CPU s/GiB %.2f | catch-up %.1f MiB/s, CPU s/GiB server %.2f client %.2f, GETs/GiB %.0f"
      % (p["mib_per_sec"], p["ack_ms"]["p50"], p["server_cpu_s_per_gib"], c["mib_per_sec"], c["server_cpu_s_per_gib"],
         c["client_cpu_s_per_gib"], c["gets_per_gib"]))')"
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done
