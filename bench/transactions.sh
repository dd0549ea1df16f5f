#!/usr/bin/env bash
# A transactional Kafka producer next to the idempotent one it is built on, on one
# `shale serve --kafka`, in one run, at each store latency (0 and 30 ms added to every
# request of the local filesystem store): librdkafka (`shale-kafka-bench`: acks=all, 1 KiB
# records, batches up to 4 MiB, at most 5,120 records awaiting acks) producing to 4
# partitions for SECONDS, idempotent, then transactional committing every 1,000 and every
# 10,000 records (commit latency p50/p99 is in the `transactions` field). Produce only (no
# catch-up). Each line is one JSON result.
#   cargo build --release -p shale -p shale-bench
#   bench/transactions.sh [SECONDS] [DELAYS] > results.txt    e.g. bench/transactions.sh 10 "0ms 30ms"
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
delays="${2:-0ms 30ms}"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
source bench/lib.sh
for delay in $delays; do
  serve_kafka "$work" "$delay"
  for each in 0 1000 10000; do
    echo "== store delay $delay: kafka produce, 4 partitions, records per transaction $each (0: idempotent, not transactional), ${seconds}s"
    target/release/shale-kafka-bench --bootstrap 127.0.0.1:18492 --metrics-url http://127.0.0.1:18480 \
      --server-pid "$pid" --partitions 4 --seconds "$seconds" --in-flight 5120 --batch-bytes 4194304 \
      --catch-up false --transaction-records "$each"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
