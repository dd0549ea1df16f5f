#!/usr/bin/env bash
# Scale-out at object-store latency: one `shale metadata`, 1, 2 and 3 `shale gateway`s
# and one `shale reader` on the local S3 server (moto), with 0 and 30 ms added to every
# store request (15 ms each way, S3 Standard's round trip). Per setup: 16 closed-loop
# producers per gateway over 1,000 streams, 1-record appends, then 100 x 1 KiB appends;
# per-gateway and total appends/s and MiB/s, ack p50/p99, commits/s and WAL PUTs/s at
# metadata, PUTs per GiB. Then, through the reader: live delivery (SSE) and catch-up,
# next to `shale serve` at the same latency. Everything listens on 127.0.0.1 only.
#   cargo build --release -p shale -p shale-bench && bash localstack/s3-local.sh install
#   bench/scale.sh [SECONDS] [DELAYS] [PARTS]   e.g. bench/scale.sh 10 "0ms 30ms" "writes reads"
# SHALE=path/to/shale runs another build's servers (an A/B, with this tree's load client).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
delays="${2:-0ms 30ms}"
parts="${3:-writes reads}"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
source bench/lib.sh
metric() { curl -sf "$1/metrics" | awk -v n="$2" '$1 == n { print $2 }'; }
start_moto 19200 "$work/moto.log"
export AWS_ENDPOINT_URL=http://127.0.0.1:19200 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
  AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true SHALE_LOG=warn
shale="${SHALE:-target/release/shale}"
bench=target/release/shale-bench
meta=http://127.0.0.1:19290

# Starts metadata, N gateways and a reader on a fresh bucket; sets $pids.
start_cluster() {
  local delay="$1" gateways="$2" bucket="b$RANDOM$RANDOM"
  curl -sf -X PUT "http://127.0.0.1:19200/$bucket" >/dev/null
  pids=()
  "$shale" metadata --store "s3://$bucket" --store-delay "$delay" --grpc 127.0.0.1:19261 --http 127.0.0.1:19290 \
    >"$work/metadata.log" 2>&1 & pids+=($!)
  for g in $(seq "$gateways"); do
    "$shale" gateway --store "s3://$bucket" --store-delay "$delay" --metadata 127.0.0.1:19261 \
      --http "127.0.0.1:1928$g" --grpc "127.0.0.1:1925$g" >"$work/gateway$g.log" 2>&1 & pids+=($!)
  done
  "$shale" reader --store "s3://$bucket" --store-delay "$delay" --metadata 127.0.0.1:19261 \
    --http 127.0.0.1:19289 --grpc 127.0.0.1:19259 >"$work/reader.log" 2>&1 & pids+=($!)
  wait_ready "$meta" 300
  for g in $(seq "$gateways"); do wait_ready "http://127.0.0.1:1928$g" 300; done
  wait_ready http://127.0.0.1:19289 300
  # The 1,000 streams, created once, so the measured runs make commits only.
  "$bench" --url http://127.0.0.1:19281 --workload throughput --streams 1000 --seconds 0 >/dev/null
}
stop_cluster() { kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }

# Runs the throughput workload on every gateway at once; prints one row.
run_load() {
  local delay="$1" gateways="$2" batch="$3" size="$4" label="$5"
  local calls0 flushes0 puts0; calls0=$(metric $meta shale_metadata_durable_calls_total)
  flushes0=$(metric $meta shale_metadata_wal_flushes_total); puts0=$(metric $meta shale_object_puts_total)
  local started; started=$(date +%s.%N)
  local loads=()
  for g in $(seq "$gateways"); do
    "$bench" --url "http://127.0.0.1:1928$g" --workload throughput --streams-exist --producers 16 --streams 1000 --batch "$batch" \
      --record-bytes "$size" --seconds "$seconds" --json "$work/g$g.json" >"$work/bench$g.log" 2>&1 & loads+=($!)
  done
  wait "${loads[@]}"
  local ended; ended=$(date +%s.%N)
  local calls1 flushes1 puts1; calls1=$(metric $meta shale_metadata_durable_calls_total)
  flushes1=$(metric $meta shale_metadata_wal_flushes_total); puts1=$(metric $meta shale_object_puts_total)
  python3 - "$work" "$gateways" "$delay" "$label" "$calls0" "$calls1" "$flushes0" "$flushes1" "$puts0" "$puts1" \
    "$started" "$ended" <<'PY'
import json, sys
work, n, delay, label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
c0, c1, f0, f1, p0, p1, t0, t1 = map(float, sys.argv[5:13])
runs = [json.load(open(f"{work}/g{g}.json")) for g in range(1, n + 1)]
wall = t1 - t0
per = " ".join(f"{r['appends_per_sec']:.0f}" for r in runs)
total = sum(r["appends_per_sec"] for r in runs)
mib = sum(r["mib_per_sec"] for r in runs)
gib = sum(r["mib_written"] for r in runs) / 1024
puts = sum(r["object_requests"]["puts"] for r in runs) + (p1 - p0)
p50 = max(r["ack_latency"]["p50_ms"] for r in runs)
p99 = max(r["ack_latency"]["p99_ms"] for r in runs)
print(f"| {delay} | {n} | {label} | {per} | {total:.0f} | {mib:.1f} | {p50:.1f} | {p99:.1f} | "
      f"{(c1 - c0) / wall:.0f} | {(f1 - f0) / wall:.1f} | {puts / gib if gib else 0:.0f} |")
PY
  rm -f "$work"/g*.json
}

if [[ " $parts " == *" writes "* ]]; then
echo "| store delay per request | gateways | appends | appends/s per gateway | appends/s total | MiB/s total | ack p50 ms (worst gateway) | ack p99 ms | commits/s at metadata | WAL flushes/s | PUTs per GiB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for delay in $delays; do
  for gateways in 1 2 3; do
    start_cluster "$delay" "$gateways"
    run_load "$delay" "$gateways" 1 128 "1 x 128 B"
    run_load "$delay" "$gateways" 100 1024 "100 x 1 KiB"
    stop_cluster
  done
done
fi
[[ " $parts " == *" reads "* ]] || exit 0
echo
echo "Reads through the reader (\`shale reader\`) and in process (\`shale serve\`), same store delay:"
for delay in $delays; do
  start_cluster "$delay" 1
  bucket="s$RANDOM$RANDOM"; curl -sf -X PUT "http://127.0.0.1:19200/$bucket" >/dev/null
  "$shale" serve --store "s3://$bucket" --store-delay "$delay" --http 127.0.0.1:19291 --grpc 127.0.0.1:19292 \
    >"$work/serve.log" 2>&1 & serve=$!
  wait_ready http://127.0.0.1:19291 300
  for setup in reader serve; do
    if [ "$setup" = reader ]; then target=(--url http://127.0.0.1:19281 --read-url http://127.0.0.1:19289 --metrics-url $meta)
    else target=(--url http://127.0.0.1:19291); fi
    echo "== $delay $setup: live delivery (append every 5 ms, SSE)"
    "$bench" "${target[@]}" --workload e2e --seconds "$seconds" | grep -E "latency\.(p50|p99)_ms"
    # 256 MiB: a warm pass over less finishes in a tenth of a second, too short to measure.
    echo "== $delay $setup: catch-up (256 MiB, unary reads)"
    "$bench" "${target[@]}" --workload catchup --catchup-mib 256 | grep -E "mib_per_sec|object_gets|hit_ratio"
  done
  kill "$serve"; wait "$serve" 2>/dev/null || true
  stop_cluster
done
