#!/usr/bin/env bash
# A live Kafka consumer's fetches with and without `fetch.min.bytes`, two builds taking
# turns on a fresh `shale serve --kafka` each time: `shale-kafka-bench` paces a librdkafka
# producer (acks=all, idempotent, 1 KiB records) at RATE MiB/s to one partition for
# SECONDS while a consumer follows it live with each `fetch.min.bytes` in MIN_BYTES
# (`fetch.wait.max.ms` 500, librdkafka's default). One line per run: the follower's fetch
# requests per GiB (librdkafka's statistics), the server's CPU s per GiB while producing
# and following, the producer's ack p50/p99.
#
#   bench/follow.sh OLD_RELEASE_DIR NEW_RELEASE_DIR [ROUNDS] [MIN_BYTES] [RATE] [SECONDS] [DELAY]
#   e.g. bench/follow.sh /tmp/old target/release 2 "1 262144" 4 20 0ms
# Each directory holds `shale`; `shale-kafka-bench` is target/release's.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2 ROUNDS=${3:-2} MIN_BYTES=${4:-1 262144} RATE=${5:-4} SECONDS_=${6:-20} DELAY=${7:-0ms}
source bench/lib.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for round in $(seq "$ROUNDS"); do
  for min_bytes in $MIN_BYTES; do
    for build in "old:$OLD" "new:$NEW"; do
      name=${build%%:*} dir=${build#*:}
      serve_kafka "$work" "$DELAY" "$dir/shale"
      result=$(target/release/shale-kafka-bench --bootstrap 127.0.0.1:18492 --metrics-url http://127.0.0.1:18480 \
        --server-pid "$pid" --partitions 1 --seconds "$SECONDS_" --rate "$RATE" --catch-up false \
        --follow-min-bytes "$min_bytes")
      echo "round $round $name fetch.min.bytes=$min_bytes $(echo "$result" | python3 -c '
import json, sys
d = json.load(sys.stdin); p, f = d["produce"], d["follower"]
print("fetches %d (%.0f per GiB) | server CPU s/GiB %.2f | ack p50 %.1f p99 %.1f ms | %.2f MiB/s"
      % (f["fetches"], f["fetches_per_gib"], p["server_cpu_s_per_gib"], p["ack_ms"]["p50"], p["ack_ms"]["p99"],
         p["mib_per_sec"]))')"
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done
