#!/usr/bin/env bash
# Side by side: the same serial and throughput workloads, and `s2 bench`, against s2-lite
# and Shale, both on the local filesystem, in one run. s2-lite binds 0.0.0.0, so the whole
# run happens inside a fresh network namespace (`unshare --net`, root needed) where only
# loopback exists: nothing listens beyond it.
#   cargo build --release -p shale -p shale-bench
#   S2=/path/to/s2 bench/peers.sh [SECONDS] > results.txt
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
export S2="${S2:-$(command -v s2)}" SECONDS_PER_RUN="$seconds"
exec unshare --net bash -s <<'INNER'
set -euo pipefail
ip link set lo up
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
"$S2" lite --port 18090 --local-root "$work/lite" --no-dashboard >"$work/lite.log" 2>&1 &
target/release/shale serve --http 127.0.0.1:18091 --grpc 127.0.0.1:18092 --data-dir "$work/shale" >"$work/shale.log" 2>&1 &
wait_port 18090; wait_port 18091
for peer in "s2-lite http://127.0.0.1:18090" "shale http://127.0.0.1:18091"; do
  set -- $peer
  echo "== $1 serial"
  target/release/shale-bench --url "$2" --workload serial --seconds "$SECONDS_PER_RUN"
  echo "== $1 throughput (16 producers, 1000 streams, 100 x 1 KiB per append)"
  target/release/shale-bench --url "$2" --workload throughput --seconds "$SECONDS_PER_RUN"
  echo "== $1 s2 bench (5 MiB/s, 8 KiB records)"
  S2_ACCOUNT_ENDPOINT="$2" S2_BASIN_ENDPOINT="$2" S2_ACCESS_TOKEN=none HOME="$work" NO_COLOR=1 \
    "$S2" bench bench-basin -d "${SECONDS_PER_RUN}s" -w 2s -t 5 2>&1 | grep -v '^\s*$' | tail -12
done
INNER
