#!/usr/bin/env bash
# Side by side, in one run, on the local filesystem: s2-lite and Shale under the same
# workloads: Shale's serial and throughput workloads, then `s2 bench` (1 KiB records on
# one stream) at 10, 50, 200 and 500 MiB/s (the last above what either reaches, so both
# saturate), each followed by its catch-up read, then the objects each left on disk;
# each peer runs alone. Then Shale's separate roles (metadata, gateway, reader
# processes) behind `shale-route` (one address for S2's CLI: reads to the reader, the
# rest to the gateway), and a fresh `shale serve` behind the same router, taking turns,
# so the two compare with the router's cost in both. s2-lite binds 0.0.0.0, so the
# whole run happens inside a fresh network namespace (`unshare --net`, root needed)
# where only loopback exists.
#   cargo build --release -p shale -p shale-bench
#   S2=/path/to/s2 [REPEATS=3] [CLEANUP_PAUSE=310] bench/peers.sh [SECONDS] > results.txt
# Each `s2 bench` configuration runs REPEATS times; its summary line gives the medians.
# With the defaults and 10 s runs the whole script takes about 20 minutes.
# Shale runs with its defaults (fsync before every ack); s2-lite does not fsync.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-15}"
export S2="${S2:-$(command -v s2)}" SECONDS_PER_RUN="$seconds" REPEATS="${REPEATS:-3}"
exec unshare --net bash -s <<'INNER'
set -euo pipefail
ip link set lo up
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
source bench/lib.sh
cpu_seconds() { for pid in "$@"; do awk '{print ($14 + $15) / 100}' "/proc/$pid/stat"; done | awk '{s += $1} END {printf "%.1f", s}'; }
# median: the middle of the durations or rates on stdin, durations in ms ("1.7s" and
# "850µs" converted).
median() {
  awk '{ v = $1 + 0; if ($1 ~ /[0-9]s$/) v *= 1000; if ($1 ~ /µs$/) v /= 1000; print v }' | sort -g \
    | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "n/a" }'
}
# append_latency URL: Shale's appends so far and how many took over 10 and 20 ms, from its
# `shale_append_seconds` histogram; nothing for a peer without it.
append_latency() {
  curl -sf "$1/metrics" 2>/dev/null | awk '
    /^shale_append_seconds_count/ { n = $2 }
    /^shale_append_seconds_bucket\{le="0.01"\}/ { u10 = $2 }
    /^shale_append_seconds_bucket\{le="0.02"\}/ { u20 = $2 }
    END { if (n != "") print n, n - u10, n - u20 }' || true
}
# s2_bench NAME URL PIDS RATES...: `s2 bench` REPEATS times at each rate, then the
# medians of the write rate, catch-up rate and ack p99, with the CPU the PIDS used.
s2_bench() {
  local name="$1" url="$2" pids="$3"; shift 3
  curl -sf -X POST "$url/v1/basins" -H 'content-type: application/json' -d '{"basin":"bench-basin"}' >/dev/null || true
  for rate in "$@"; do
    local before out writes="" catchups="" p99s="" appends_before
    before="$(cpu_seconds $pids)"
    appends_before="$(append_latency "$url")"
    for run in $(seq "$REPEATS"); do
      echo "== $name s2 bench: 1 KiB records, target $rate MiB/s, ${SECONDS_PER_RUN}s, then catch-up (run $run of $REPEATS)"
      out="$(S2_ACCOUNT_ENDPOINT="$url" S2_BASIN_ENDPOINT="$url" S2_ACCESS_TOKEN=none HOME="$work" NO_COLOR=1 \
        "$S2" bench bench-basin -b 1024 -t "$rate" -d "${SECONDS_PER_RUN}s" -w 2s 2>&1 \
        | grep -E '^(Write|Read|Catchup)|^(p50|p99)|Error|verification' || true)"
      echo "$out"
      writes+="$(awk '/^Write:/ { print $2 }' <<<"$out")"$'\n'
      catchups+="$(awk '/^Catchup:/ { print $2 }' <<<"$out")"$'\n'
      p99s+="$(awk '/^p99/ { print $3; exit }' <<<"$out")"$'\n'
    done
    echo "server CPU: $(awk -v a="$before" -v b="$(cpu_seconds $pids)" 'BEGIN { printf "%.1f", b - a }') s for $REPEATS runs"
    if [ -n "$appends_before" ]; then
      awk -v a="$appends_before" -v b="$(append_latency "$url")" 'BEGIN { split(a, x); split(b, y);
        printf "server-side appends (submission to answer) in these runs: %d, over 10 ms: %d, over 20 ms: %d\n",
          y[1] - x[1], y[2] - x[2], y[3] - x[3] }'
    fi
    echo "== $name at $rate MiB/s, median of $REPEATS: write $(grep . <<<"$writes" | median) MiB/s," \
      "catch-up $(grep . <<<"$catchups" | median) MiB/s, ack p99 $(grep . <<<"$p99s" | median) ms"
  done
}
# peer NAME URL DIR PID: the workloads against one peer, then what it left on disk. Each
# peer runs alone and is stopped (and its data removed) after, so neither's background
# work (compaction, collection) lands in the other's runs.
peer() {
  echo "== $1 serial"
  target/release/shale-bench --url "$2" --workload serial --seconds "$SECONDS_PER_RUN"
  echo "== $1 throughput (16 producers, 1000 streams, 100 x 1 KiB per append)"
  target/release/shale-bench --url "$2" --workload throughput --seconds "$SECONDS_PER_RUN"
  s2_bench "$1" "$2" "$4" 10 50 200 500
  echo "== $1 on disk: $(find "$3" -type f | wc -l) files, $(du -sh "$3" | cut -f1)"
  kill "$4"; wait "$4" 2>/dev/null || true
  # Room on the disk for the next peer. On ext4 without a journal (this machine's root
  # filesystem) every file creation steps past inodes freed in the last five minutes, so
  # one peer's cleanup would slow the next peer's writes: wait that out.
  rm -rf "$3"; sync; sleep "${CLEANUP_PAUSE:-310}"
}
"$S2" lite --port 18090 --local-root "$work/lite" --no-dashboard >"$work/lite.log" 2>&1 &
lite_pid=$!
wait_port 18090
peer s2-lite http://127.0.0.1:18090 "$work/lite" "$lite_pid"
target/release/shale serve --http 127.0.0.1:18091 --grpc 127.0.0.1:18092 --data-dir "$work/shale" >"$work/shale.log" 2>&1 &
shale_pid=$!
wait_port 18091
peer shale http://127.0.0.1:18091 "$work/shale" "$shale_pid"

# The separate roles, and a fresh `shale serve`, each behind the router, taking turns.
export SHALE_LOG=warn
roles="file://$work/roles"
mkdir -p "$work/roles"
target/release/shale serve --http 127.0.0.1:18091 --grpc 127.0.0.1:18092 --data-dir "$work/routed-serve" \
  >"$work/routed-serve.log" 2>&1 &
shale_pids=$!
target/release/shale metadata --store "$roles" --grpc 127.0.0.1:18161 --http 127.0.0.1:18190 >"$work/metadata.log" 2>&1 &
role_pids=$!
target/release/shale gateway --store "$roles" --metadata 127.0.0.1:18161 --http 127.0.0.1:18181 --grpc 127.0.0.1:18151 \
  >"$work/gateway.log" 2>&1 &
role_pids="$role_pids $!"
target/release/shale reader --store "$roles" --metadata 127.0.0.1:18161 --http 127.0.0.1:18183 --grpc 127.0.0.1:18153 \
  >"$work/reader.log" 2>&1 &
role_pids="$role_pids $!"
target/release/shale-route --listen 127.0.0.1:18093 --gateway http://127.0.0.1:18181 --reader http://127.0.0.1:18183 \
  2>"$work/route-roles.log" &
target/release/shale-route --listen 127.0.0.1:18094 --gateway http://127.0.0.1:18091 --reader http://127.0.0.1:18091 \
  2>"$work/route-serve.log" &
for port in 18190 18181 18183 18091; do
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
done
wait_port 18093; wait_port 18094
for rate in 50 200; do
  s2_bench "shale roles (metadata + gateway + reader, routed)" http://127.0.0.1:18093 "$role_pids" "$rate"
  s2_bench "shale serve (routed)" http://127.0.0.1:18094 "$shale_pids" "$rate"
done
INNER
