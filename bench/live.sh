#!/usr/bin/env bash
# A/B of two builds on a live tail, interleaved (A, B, A, B, ...):
# 1. local filesystem: S2's SDK producer writes MIB at 50 MiB/s (`shale-cpu-bench --path
#    s2s-produce`) while an S2S read session follows the same stream from 0; the
#    server's CPU seconds per GiB written (and read live), and its store GETs;
# 2. at DELAY per store request (`--store memory:// --store-delay`): `shale-bench
#    --workload e2e`, append to delivery through a live SSE read, and the ack latency.
#
#   bench/live.sh OLD_DIR NEW_DIR [ROUNDS] [MIB] [DELAY]
# Each directory holds a `shale` binary; the clients are target/release's.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2 ROUNDS=${3:-3} MIB=${4:-512} DELAY=${5:-30ms}
source bench/lib.sh
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT
B=target/release
URL=http://127.0.0.1:18391

start() { # DIR ARGS...: a server on 18391, pid in $pid
  local dir=$1; shift
  SHALE_LOG=warn "$dir/shale" serve --http 127.0.0.1:18391 --grpc 127.0.0.1:18392 "$@" >"$OUT/serve.log" 2>&1 &
  pid=$!
  wait_ready "$URL"
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; }

for round in $(seq "$ROUNDS"); do
  for side in "A $OLD" "B $NEW"; do
    set -- $side
    rm -rf "$OUT/data"
    start "$2" --data-dir "$OUT/data"
    curl -sf -X POST "$URL/v1/basins" -H 'content-type: application/json' -d '{"basin":"cpu-basin"}' >/dev/null
    curl -sf -X POST "$URL/v1/streams" -H 's2-basin: cpu-basin' -H 'content-type: application/json' \
      -d '{"stream":"live"}' >/dev/null
    before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    $B/shale-cpu-bench --url "$URL" --path s2s-read --stream live --mib "$MIB" >"$OUT/read.json" &
    reader=$!
    $B/shale-cpu-bench --url "$URL" --path s2s-produce --stream live --mib "$MIB" --rate 50 >"$OUT/write.json"
    wait "$reader"
    after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    gets=$(curl -sf "$URL/metrics" | awk '/^shale_object_gets_total / { print $2 }')
    awk -v n="$1" -v r="$round" -v t="$((after - before))" -v mib="$MIB" -v g="$gets" 'BEGIN {
      printf "%s round %s, local, 50 MiB/s with a live reader: server CPU %.2f s per GiB, %d store GETs\n",
        n, r, t / 100 / (mib / 1024), g }'
    stop
    start "$2" --store memory:// --store-delay "$DELAY"
    $B/shale-bench --url "$URL" --workload e2e --seconds 8 --json "$OUT/e2e.json" >/dev/null
    python3 - "$1" "$round" "$DELAY" "$OUT/e2e.json" <<'PY'
import json, sys
name, round_, delay, path = sys.argv[1:]
f = json.load(open(path))
a, d = f["ack_latency"], f["append_to_delivery_latency"]
print(f"{name} round {round_}, {delay}, e2e: ack p50/p99 {a['p50_ms']}/{a['p99_ms']} ms, "
      f"append to delivery p50/p99 {d['p50_ms']}/{d['p99_ms']} ms")
PY
    stop
  done
done
