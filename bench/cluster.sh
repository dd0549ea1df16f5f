#!/usr/bin/env bash
# The same workloads against Shale as separate processes (one `shale metadata`, one
# `shale gateway`, one `shale reader`) and against `shale serve`, both on the local S3
# server (moto), in one run. Everything listens on 127.0.0.1 only.
#   cargo build --release -p shale -p shale-bench && bash localstack/s3-local.sh install
#   bench/cluster.sh [SECONDS] > results.txt
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
source bench/lib.sh
start_moto 19100 "$work/moto.log"
curl -sf -X PUT http://127.0.0.1:19100/cluster >/dev/null
curl -sf -X PUT http://127.0.0.1:19100/single >/dev/null
export AWS_ENDPOINT_URL=http://127.0.0.1:19100 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
  AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true SHALE_LOG=warn
shale=target/release/shale
"$shale" metadata --store s3://cluster --grpc 127.0.0.1:19161 --http 127.0.0.1:19190 >"$work/metadata.log" 2>&1 &
"$shale" gateway --store s3://cluster --metadata 127.0.0.1:19161 --http 127.0.0.1:19181 --grpc 127.0.0.1:19151 \
  >"$work/gateway.log" 2>&1 &
"$shale" reader --store s3://cluster --metadata 127.0.0.1:19161 --http 127.0.0.1:19183 --grpc 127.0.0.1:19153 \
  >"$work/reader.log" 2>&1 &
"$shale" serve --store s3://single --http 127.0.0.1:19191 --grpc 127.0.0.1:19192 >"$work/serve.log" 2>&1 &
for url in http://127.0.0.1:19190 http://127.0.0.1:19181 http://127.0.0.1:19183 http://127.0.0.1:19191; do
  wait_ready "$url"
done
single=(--url http://127.0.0.1:19191)
cluster=(--url http://127.0.0.1:19181 --read-url http://127.0.0.1:19183 --metrics-url http://127.0.0.1:19190)
for setup in single cluster; do
  declare -n target="$setup"
  echo "== $setup serial"
  target/release/shale-bench "${target[@]}" --workload serial --seconds "$seconds"
  echo "== $setup throughput (16 producers, 1000 streams, 100 x 1 KiB per append)"
  target/release/shale-bench "${target[@]}" --workload throughput --seconds "$seconds"
  echo "== $setup e2e (append every 5 ms, live SSE read)"
  target/release/shale-bench "${target[@]}" --workload e2e --seconds "$seconds"
  echo "== $setup catchup (64 MiB)"
  target/release/shale-bench "${target[@]}" --workload catchup --catchup-mib 64
done
