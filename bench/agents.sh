#!/usr/bin/env bash
# Kafka agents at scale on the local S3 server (moto): one `shale metadata` and 1, 2 and 3
# `shale agent`s, every store request delayed by DELAY (30 ms: S3 Standard's round trip).
# PER_AGENT `shale-kafka-bench` processes per agent (librdkafka, acks=all, idempotence
# IDEMPOTENCE, 1 KiB records, 16 partitions each, batches up to 4 MiB, at most 5 MiB
# awaiting acks as `s2 bench` keeps) produce at once, each bootstrapping from one agent
# (the load grows with the agents, as bench/scale.sh's grows with the gateways); per
# cluster size: total MiB/s, the worst ack p50/p99, PUTs per GiB (agents and metadata),
# CPU seconds per GiB (all Shale processes). Then a catch-up fetch through one agent.
# EXTRA_TOML is added to every process's config (e.g. `[gateway]\nmin_seal_interval =
# "250ms"\n` for the cost-tuned setting). Everything listens on 127.0.0.1 only.
#   cargo build --release -p shale -p shale-bench && bash localstack/s3-local.sh install
# IN_FLIGHT sets each generator's records awaiting acks (5120: 5 MiB, one producer's
# worth; more stands for many producers); RATE (MiB/s per generator) paces them, for the
# ack latency at a given load rather than at saturation. PRODUCERS runs that many librdkafka
# producers in each generator (sharing its RATE) and GENERATORS sets the generators' count
# (default AGENTS x PER_AGENT): GENERATORS=4 PRODUCERS=16 is 64 producers in 4 processes.
# LINGER_MS is the producers' `linger.ms` (5). SHALE_BIN runs another build's `shale`.
# CATCH_UP=0 skips the catch-up.
# LOAD_PRODUCERS=64 runs that many producers in one `shale-kafka-load` process instead
# (the produce API spoken directly: at most a tenth of a core where 64 librdkafka
# producers take more than one), over every agent, RATE MiB/s in total, LINGER_MS (100)
# between a producer's requests, each batch to one partition (SPREAD=1: every request over
# all 16); RATE=0 is a closed loop (5 requests of 1 MB batches unanswered per producer, as
# the librdkafka generators' 5 MiB); LOAD_PER_AGENT=N runs N such producers per agent.
# Printed besides: the generator's and the store server's (moto's) CPU. STORE=local puts
# the bucket on the local filesystem instead of moto (no store server on the 2 cores;
# every process writes the same directory, each write fsynced), DELAY still added;
# STORE_DIR=/dev/shm puts that directory in memory (tmpfs), so neither a store server's
# CPU nor this machine's disk bounds the agents (the bucket is removed at the end).
#   [AGENTS="1 2 3"] [IN_FLIGHT=5120] [RATE=] [GENERATORS=] [PRODUCERS=1] [LINGER_MS=5] [CATCH_UP=1]
#   [LOAD_PRODUCERS= | LOAD_PER_AGENT=] [SPREAD=] [STORE=moto|local] bench/agents.sh [SECONDS] [DELAYS] [PER_AGENT] [IDEMPOTENCE] [EXTRA_TOML]
#   e.g. bench/agents.sh 10 30ms 1 false;  AGENTS=3 bench/agents.sh 10 30ms 1 false '[gateway]\nmin_seal_interval = "250ms"\n'
set -euo pipefail
self="$(realpath "$0")"
cd "$(dirname "$0")/.."
# Each cluster size runs in a process of its own: run one after another in one process,
# later clusters went slower at more CPU per GiB (the same 3-agent cluster twice: 147.0
# then 135.8 MiB/s, 1.97 then 3.35 CPU seconds per GiB; the cause was not found).
if [ -z "${AGENTS_ONE_SIZE:-}" ] && [ "$(wc -w <<<"${AGENTS:-1 2 3}")" -gt 1 ]; then
  for size in ${AGENTS:-1 2 3}; do AGENTS_ONE_SIZE=1 AGENTS="$size" bash "$self" "$@"; done
  exit 0
fi
seconds="${1:-10}"
delays="${2:-30ms}"
per_agent="${3:-1}"
idempotence="${4:-false}"
extra_toml="${5:-}"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work" ${STORE_DIR:+"$STORE_DIR"/agents-bench-*}' EXIT
source bench/lib.sh
moto_pid=""
# The store server's CPU ticks (0 without one).
store_ticks() { if [ -n "$moto_pid" ]; then awk '{ print $14 + $15 }' "/proc/$moto_pid/stat"; else echo 0; fi; }
export AWS_ENDPOINT_URL=http://127.0.0.1:19300 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
  AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true SHALE_LOG=warn
printf '%b' "$extra_toml" >"$work/shale.toml"
export SHALE_CONFIG="$work/shale.toml"
shale="${SHALE_BIN:-target/release/shale}"
puts_total() {
  local sum=0 value
  for url in "${urls[@]}"; do
    value=$(curl -sf "$url/metrics" | awk '$1 == "shale_object_puts_total" { print $2 }')
    sum=$((sum + ${value:-0}))
  done
  echo "$sum"
}

# User and system clock ticks of the Shale processes, summed.
cpu_ticks() { for p in "${pids[@]}"; do cat "/proc/$p/stat"; done | awk '{ s += $14 + $15 } END { print s }'; }

for delay in $delays; do
  for agents in ${AGENTS:-1 2 3}; do
    # Each cluster starts on a quiet store: a new moto (which keeps every object in its
    # memory), or the earlier runs' dirty pages on their way to the disk first.
    sync
    if [ "${STORE:-moto}" != local ]; then
      start_moto 19300 "$work/moto.log"
      moto_pid=$(pgrep -f "moto_server -H 127.0.0.1 -p 19300" | head -n 1)
    fi
    bucket="agents-bench-$RANDOM$RANDOM"
    if [ "${STORE:-moto}" = local ]; then
      mkdir -p "${STORE_DIR:-$work}/$bucket"
      store="file://${STORE_DIR:-$work}/$bucket"
    else
      curl -sf -X PUT "http://127.0.0.1:19300/$bucket" >/dev/null
      store="s3://$bucket"
    fi
    pids=() urls=(http://127.0.0.1:19390)
    "$shale" metadata --store "$store" --store-delay "$delay" --grpc 127.0.0.1:19361 --http 127.0.0.1:19390 \
      >"$work/metadata.log" 2>&1 & pids+=($!)
    wait_ready http://127.0.0.1:19390 300
    for a in $(seq "$agents"); do
      "$shale" agent --store "$store" --store-delay "$delay" --metadata 127.0.0.1:19361 \
        --http "127.0.0.1:1938$a" --grpc "127.0.0.1:1935$a" --kafka "127.0.0.1:1939$a" >"$work/agent$a.log" 2>&1 &
      pids+=($!) urls+=("http://127.0.0.1:1938$a")
    done
    for a in $(seq "$agents"); do wait_ready "http://127.0.0.1:1938$a" 300; done
    metrics=$(IFS=,; echo "${urls[*]}") server_pids=$(IFS=,; echo "${pids[*]}")
    [ -n "${LOAD_PER_AGENT:-}" ] && LOAD_PRODUCERS=$((agents * LOAD_PER_AGENT))
    if [ -n "${LOAD_PRODUCERS:-}" ]; then
      # Topics first: creating 64 streams is 64 metadata writes the run should not count.
      load_args=(--producers "$LOAD_PRODUCERS" --topic-prefix "load$RANDOM" --seconds "$seconds" --linger-ms "${LINGER_MS:-100}")
      target/release/shale-kafka-load --bootstrap 127.0.0.1:19391 "${load_args[@]}" --create-only
    fi
    cpu0=$(cpu_ticks) store0=$(store_ticks)
    puts0=$(puts_total)
    loads=()
    rm -f "$work"/g*.json
    if [ -n "${LOAD_PRODUCERS:-}" ]; then
      # One light process of LOAD_PRODUCERS producers over every agent (shale-kafka-load).
      bootstraps=$(for a in $(seq "$agents"); do printf '127.0.0.1:1939%s,' "$a"; done)
      target/release/shale-kafka-load --bootstrap "${bootstraps%,}" "${load_args[@]}" --rate "${RATE:?RATE is the total MiB/s}" \
        ${SPREAD:+--spread} >"$work/g1.json" 2>"$work/g1.log" & loads+=($!)
    fi
    for g in $(seq "${GENERATORS:-$((agents * per_agent))}"); do
      [ -n "${LOAD_PRODUCERS:-}" ] && break
      bootstrap="127.0.0.1:1939$(( (g - 1) % agents + 1 ))"
      target/release/shale-kafka-bench --bootstrap "$bootstrap" --metrics-url "$metrics" --partitions 16 \
        --seconds "$seconds" --in-flight "${IN_FLIGHT:-5120}" --batch-bytes 4194304 --idempotence "$idempotence" --catch-up false \
        --producers "${PRODUCERS:-1}" --linger-ms "${LINGER_MS:-5}" ${RATE:+--rate "$RATE"} >"$work/g$g.json" 2>"$work/g$g.log" & loads+=($!)
    done
    for load in "${loads[@]}"; do
      wait "$load" || { echo "a load generator failed:" >&2; grep -v "^ " "$work"/g*.log | head -n 5 >&2; exit 1; }
    done
    puts1=$(puts_total)
    cpu1=$(cpu_ticks) store1=$(store_ticks)
    python3 - "$delay" "$agents" "$((puts1 - puts0))" "$cpu0" "$cpu1" "$((store1 - store0))" "$work"/g*.json <<'PY'
import json, sys
delay, agents, puts, cpu0, cpu1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
store_ticks = float(sys.argv[6])
runs = [json.load(open(path)) for path in sys.argv[7:]]
mib = sum(r["produce"]["mib_per_sec"] for r in runs)
gib = sum(r["produce"]["records"] * r["record_bytes"] for r in runs) / 2**30
print(json.dumps({"delay": delay, "agents": agents, "generators": len(runs), "mib_per_sec": round(mib, 1),
                  "generator_cpu_s": sum(r.get("generator_cpu_s", 0) for r in runs),
                  "ack_p50_ms": max(r["produce"]["ack_ms"]["p50"] for r in runs),
                  "ack_p99_ms": max(r["produce"]["ack_ms"]["p99"] for r in runs),
                  "puts_per_gib": round(puts / gib), "server_cpu_s_per_gib": round((cpu1 - cpu0) / 100 / gib, 2),
                  "store_cpu_s_per_gib": round(store_ticks / 100 / gib, 2)}))
PY
    if [ "$agents" = 1 ] && [ "${CATCH_UP:-1}" = 1 ]; then
      for partitions in 1 16; do
        echo "== $delay: catch-up through one agent (produce to $partitions partitions, then read back)"
        target/release/shale-kafka-bench --bootstrap 127.0.0.1:19391 --metrics-url "$metrics" --server-pid "$server_pids" \
          --partitions "$partitions" --seconds "$seconds" --in-flight 5120 --batch-bytes 4194304 --idempotence false
      done
    fi
    kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true
    if [ -n "$moto_pid" ]; then kill "$moto_pid"; wait "$moto_pid" 2>/dev/null || true; fi
  done
done
