#!/usr/bin/env bash
# A/B of two builds on the same machine, interleaved (A, B, A, B) so disk and CPU state
# fall on both alike: serial appends, throughput and catch-up, on the local filesystem
# (in-process server) and at store latency (`shale serve --store memory:// --store-delay`).
#
#   bench/ab.sh OLD_RELEASE_DIR NEW_RELEASE_DIR [SECS] [DELAY]
# Each directory holds `shale` and `shale-bench` release binaries. Prints one line per
# run: build, store, workload, and the headline figures.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2 SECS=${3:-8} DELAY=${4:-30ms}
source bench/lib.sh
OUT=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$OUT"' EXIT

summary() { # FILE: the figures that matter, on one line
  python3 - "$1" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
def pick(d, path):
    for k in path.split('.'):
        if not isinstance(d, dict) or k not in d: return None
        d = d[k]
    return d
keys = ["appends_per_sec", "mib_per_sec", "ack_latency.p50_ms", "ack_latency.p99_ms"]
parts = [f"{k}={round(pick(f, k), 2)}" for k in keys if pick(f, k) is not None]
parts += [f"pass{p['pass']}_mib_per_sec={round(p['mib_per_sec'], 1)}" for p in f.get("passes", [])]
print("  ".join(parts))
PY
}

run_local() { # BUILD_DIR NAME WORKLOAD ARGS...
  local dir=$1 name=$2 workload=$3; shift 3
  "$dir/shale-bench" --workload "$workload" --json "$OUT/r.json" "$@" >/dev/null
  echo "$name  local-fs  $workload  $(summary "$OUT/r.json")"
}

run_delayed() { # BUILD_DIR NAME PORT WORKLOAD ARGS...
  local dir=$1 name=$2 port=$3 workload=$4; shift 4
  "$dir/shale" serve --store memory:// --store-delay "$DELAY" --http "127.0.0.1:$port" --grpc "127.0.0.1:$((port + 1))" \
    >"$OUT/serve.log" 2>&1 &
  local pid=$!
  wait_ready "http://127.0.0.1:$port"
  "$dir/shale-bench" --url "http://127.0.0.1:$port" --workload "$workload" --json "$OUT/r.json" "$@" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$name  delay-$DELAY  $workload  $(summary "$OUT/r.json")"
}

for round in 1 2; do
  for side in "A $OLD" "B $NEW"; do
    set -- $side
    run_local "$2" "$1" serial --seconds "$SECS"
    run_local "$2" "$1" throughput --seconds "$SECS"
    run_local "$2" "$1" catchup --catchup-mib 128
    run_delayed "$2" "$1" 18300 serial --seconds "$SECS"
    run_delayed "$2" "$1" 18310 throughput --seconds "$SECS"
  done
done
