#!/usr/bin/env bash
# Kafka's protocol next to S2's append path on one `shale serve --kafka`, in one run, at
# each store latency (0 and 30 ms added to every request of the local filesystem store):
# librdkafka (`shale-kafka-bench`: acks=all, 1 KiB records, batches up to 4 MiB, at most
# 5 MiB awaiting acks as `s2 bench`'s producer keeps), idempotent and not, producing to 1
# and 16 partitions for SECONDS then catching up from offset 0, and `shale-bench
# --workload throughput` (16 closed-loop producers, 100 x 1 KiB appends over 16 streams,
# S2's JSON appends), taking turns. With `S2=/path/to/s2` also `s2 bench` (S2S sessions,
# 1 KiB records, one stream). Each line is one JSON result; server CPU is in them.
# With `RATE=MIB` every producer (Kafka and `s2 bench`) is paced to that many MiB/s, so
# ack latencies compare at the same offered load rather than each path's saturation
# (where a closed loop's latency is its window over its rate).
#   cargo build --release -p shale -p shale-bench
#   bench/kafka.sh [SECONDS] [DELAYS] > results.txt      e.g. bench/kafka.sh 10 "0ms 30ms"
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
delays="${2:-0ms 30ms}"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
source bench/lib.sh
kafka_rate=()
if [ -n "${RATE:-}" ]; then kafka_rate=(--rate "$RATE"); fi
for delay in $delays; do
  serve_kafka "$work" "$delay"
  for partitions in 1 16; do
    for idempotence in true false; do
      echo "== store delay $delay: kafka produce (idempotence $idempotence) + catch-up, $partitions partitions, ${seconds}s"
      target/release/shale-kafka-bench --bootstrap 127.0.0.1:18492 --metrics-url http://127.0.0.1:18480 \
        --server-pid "$pid" --partitions "$partitions" --seconds "$seconds" --in-flight 5120 --batch-bytes 4194304 \
        --idempotence "$idempotence" "${kafka_rate[@]}"
    done
    echo "== store delay $delay: S2 JSON appends, 16 producers x 100 x 1 KiB over 16 streams, ${seconds}s"
    target/release/shale-bench --workload throughput --url http://127.0.0.1:18480 --producers 16 \
      --streams 16 --batch 100 --record-bytes 1024 --seconds "$seconds"
  done
  if [ -n "${S2:-}" ]; then
    echo "== store delay $delay: s2 bench (S2S), 1 KiB records, ${seconds}s"
    curl -sf -X POST http://127.0.0.1:18480/v1/basins -H 'content-type: application/json' -d '{"basin":"bench-basin"}' >/dev/null || true
    S2_ACCOUNT_ENDPOINT=http://127.0.0.1:18480 S2_BASIN_ENDPOINT=http://127.0.0.1:18480 S2_ACCESS_TOKEN=none \
      HOME="$work" NO_COLOR=1 "$S2" bench bench-basin -b 1024 -t "${RATE:-500}" -d "${seconds}s" -w 2s 2>&1 \
      | grep -E '^(Write|Read|Catchup)|^(p50|p99)' || true
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
