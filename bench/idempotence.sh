#!/usr/bin/env bash
# What idempotent producers cost: the throughput workload (16 producers, 1000 streams,
# 100 x 1 KiB records per append) with and without `producer_id`/`producer_seq`,
# interleaved (plain, idempotent, plain, idempotent), on the local filesystem and at store
# latency (`shale serve --store memory:// --store-delay`).
#
#   bench/idempotence.sh RELEASE_DIR [SECS] [DELAY]
# RELEASE_DIR holds `shale` and `shale-bench`. Prints one line per run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=$1 SECS=${2:-10} DELAY=${3:-30ms}
source bench/lib.sh
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT

summary() { # FILE
  python3 - "$1" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
l = f["ack_latency"]
print("appends/s=%.0f  MiB/s=%.1f  p50=%.1fms  p99=%.1fms" % (f["appends_per_sec"], f["mib_per_sec"], l["p50_ms"], l["p99_ms"]))
PY
}

for round in 1 2; do
  for mode in plain idempotent; do
    flag=(); [ "$mode" = idempotent ] && flag=(--idempotent)
    "$DIR/shale-bench" --workload throughput --seconds "$SECS" "${flag[@]}" --json "$OUT/r.json" >/dev/null
    echo "round $round  local-fs      $mode  $(summary "$OUT/r.json")"
    "$DIR/shale" serve --store memory:// --store-delay "$DELAY" --http 127.0.0.1:18400 --grpc 127.0.0.1:18401 \
      >"$OUT/serve.log" 2>&1 &
    pid=$!
    wait_ready http://127.0.0.1:18400
    "$DIR/shale-bench" --url http://127.0.0.1:18400 --workload throughput --seconds "$SECS" "${flag[@]}" \
      --json "$OUT/r.json" >/dev/null
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "round $round  delay-$DELAY  $mode  $(summary "$OUT/r.json")"
  done
done
