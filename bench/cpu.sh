#!/usr/bin/env bash
# What the server spends per GiB, in one run, on the local filesystem (with fsync):
# 1. `s2 bench` (1 KiB records, one stream) at 50 MiB/s for 20 s, then its catch-up read,
#    against s2-lite and `shale serve` taking turns ROUNDS times, each on a fresh data
#    directory: server CPU seconds (from /proc) per GiB written and read back.
# 2. Each client path alone (`shale-cpu-bench`: S2S append session, S2's SDK producer
#    paced at 50 MiB/s as `s2 bench` writes, unary JSON appends,
#    S2S, SSE and `shale.v1` read sessions; Kafka produce and fetch through
#    `shale-kafka-bench`), MIB each against one `shale serve --kafka` with compaction
#    off, so each figure is the path's own: server CPU seconds per GiB.
# 3. The same paths with the server under callgrind (CALLGRIND_MIB each): instructions
#    per GiB, which repeat from run to run where CPU seconds do not; the counters are
#    zeroed before each path and dumped after it (`callgrind_control`); user-space
#    instructions only (the kernel's work is not counted); then a compaction pass and a
#    tiering pass in process, each counted from the bench's own marks around the pass.
#    Where the time goes: perf, as in docs/benchmarks.md.
# Part 2 also runs compaction and tiering in process (`shale-lifecycle-bench`,
# `shale-tiering-bench`): CPU seconds per GiB of their passes. These link the crates of the
# build they were built with, so each build's own copies are used where its directory has
# them (else target/release's).
# s2-lite binds 0.0.0.0, so the run happens inside a fresh network namespace
# (`unshare --net`, root needed) where only loopback exists.
#   cargo build --release -p shale -p shale-bench
#   S2=/path/to/s2 bench/cpu.sh [ROUNDS] [MIB] [CALLGRIND_MIB] > results.txt
# Without `s2` on the PATH (or S2), part 1 is skipped; CALLGRIND_MIB=0 skips part 3.
# An A/B: BUILDS="old:/dir/a new:/dir/b" (each directory holds a `shale` binary) runs
# parts 1 and 2 for each build in turn, every round (s2-lite once per round); part 1
# runs the builds in the reverse order every other round (A-B, B-A, ...), because the
# server that runs right after s2-lite measured lower than the one after it, whichever
# build it was (0.2-1.0 CPU s per GiB, 2026-12-06). LITE=0 leaves s2-lite out; MIB=0
# skips part 2.
# Every server gets a data directory of its own, and nothing is deleted until the script
# ends: on ext4 without a journal, each file created in the minutes after a delete first
# scans the inodes recently deleted, so one run's cleanup made the next server's file
# creates dearer (up to 1.6x the CPU per GiB for Shale, which creates a file per store
# request). FRESH_FS=1 goes further: each server's directory is a new ext4 file system of
# its own (a sparse image, loop-mounted in the run's private mount namespace), so no
# earlier use of the machine's disk shows in the figures. DROP_CACHES=1 (root) empties
# the page cache before each server starts, so every peer begins with the machine's
# memory free: on the machine of docs/benchmarks.md, a page cache filled by earlier runs
# (17 of 24 GiB) made the same build's figures up to 1.6x higher, and by how much moved
# with whatever ran before.
set -euo pipefail
cd "$(dirname "$0")/.."
export S2="${S2:-$(command -v s2 || true)}" ROUNDS="${1:-2}" MIB="${2:-512}" CALLGRIND_MIB="${3:-64}"
export BUILDS="${BUILDS:-shale:target/release}"
# Every server's data stays until the end (see below): about 3 GiB per `s2 bench` server,
# so three rounds of two builds and part 2 want some 30 GiB free. A full disk fails the
# runs' appends ("segment upload failed"), which is no figure of CPU.
free_gib="$(df -P --block-size=1G "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $4 }')"
if [ "$free_gib" -lt 30 ]; then
  echo "warning: ${free_gib} GiB free under ${TMPDIR:-/tmp}; a run of several rounds may fill it" >&2
fi
exec unshare --net --mount bash -s <<'INNER'
set -euo pipefail
ip link set lo up
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true
  umount "$work"/data-* 2>/dev/null || true; rm -rf "$work"' EXIT
B=target/release
source bench/lib.sh
cpu_seconds() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
kernel_seconds() { awk '{print $15 / 100}' "/proc/$1/stat"; }
minor_faults() { awk '{print $10}' "/proc/$1/stat"; }
stop() { kill "$1"; wait "$1" 2>/dev/null || true; }
# settle: with DROP_CACHES=1, the page cache written back and emptied (see the header).
settle() {
  if [ "${DROP_CACHES:-0}" = 1 ]; then
    sync
    echo 1 >/proc/sys/vm/drop_caches
  fi
}

# data_dir NAME: a new, empty directory for one server's data, printed; on a file system
# of its own with FRESH_FS=1. Removed only when the script ends (see the header).
data_dir() {
  local dir="$work/data-$1"
  mkdir "$dir"
  if [ "${FRESH_FS:-0}" = 1 ]; then
    truncate -s 16G "$dir.img"
    mkfs.ext4 -q "$dir.img"
    mount -o loop "$dir.img" "$dir"
  fi
  echo "$dir"
}

# s2_bench_cpu NAME URL PID: `s2 bench` at 50 MiB/s for 20 s and its catch-up; the
# server's CPU seconds over the run, per GiB written (and read back), and the kernel's
# part of them (system time: what writing, syncing and sending the same bytes costs any
# server); its minor faults per GiB (memory touched for the first time), its RSS after,
# and (Shale's `/metrics`) the block reads that went to the store and the segments
# committed per GiB (each a segment file and a WAL object, the part of the CPU that
# follows the client's batching).
s2_bench_cpu() {
  local name="$1" url="$2" pid="$3" before kernel faults out write catchup metrics misses segments
  curl -sf -X POST "$url/v1/basins" -H 'content-type: application/json' -d '{"basin":"bench-basin"}' >/dev/null || true
  before="$(cpu_seconds "$pid")" kernel="$(kernel_seconds "$pid")" faults="$(minor_faults "$pid")"
  out="$(S2_ACCOUNT_ENDPOINT="$url" S2_BASIN_ENDPOINT="$url" S2_ACCESS_TOKEN=none HOME="$work" NO_COLOR=1 \
    "$S2" bench bench-basin -b 1024 -t 50 -d 20s -w 2s 2>&1 | grep -E '^(Write|Read|Catchup)|^(p50|p99)|Error|verification' || true)"
  echo "$out"
  write="$(awk '/^Write:/ { print $2 }' <<<"$out")"
  catchup="$(awk '/^Catchup:/ { print $2 }' <<<"$out")"
  metrics="$(curl -sf "$url/metrics" || true)"
  misses="$(awk '/^shale_cache_block_misses_total/ { print $2 }' <<<"$metrics")"
  segments="$(awk '/^shale_segments_written_total/ { print $2 }' <<<"$metrics")"
  awk -v name="$name" -v w="$write" -v c="$catchup" -v a="$before" -v b="$(cpu_seconds "$pid")" \
    -v k0="$kernel" -v k1="$(kernel_seconds "$pid")" \
    -v f0="$faults" -v f1="$(minor_faults "$pid")" -v rss="$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")" \
    -v misses="${misses:--}" -v segments="${segments:--}" 'BEGIN {
    gib = w * 20 / 1024
    per_gib = segments == "-" ? "-" : sprintf("%d", segments / gib)
    printf "== %s: write %.1f MiB/s (%.2f GiB), catch-up %.1f MiB/s, server CPU %.1f s: %.2f s per GiB written and read back (%.2f of them in the kernel); %d thousand minor faults per GiB, RSS %d MiB, block misses %s, segments per GiB %s\n",
      name, w, gib, c, b - a, (b - a) / gib, (k1 - k0) / gib, (f1 - f0) / gib / 1000, rss / 1024, misses, per_gib }'
}

if [ -n "$S2" ]; then
  echo "# 1. s2 bench at 50 MiB/s for 20 s, then its catch-up; peers taking turns"
  for round in $(seq "$ROUNDS"); do
    if [ "${LITE:-1}" != 0 ]; then
      settle
      "$S2" lite --port 18090 --local-root "$(data_dir "lite-$round")" --no-dashboard >"$work/lite.log" 2>&1 &
      lite=$!
      wait_port 18090 600
      s2_bench_cpu "s2-lite, round $round" http://127.0.0.1:18090 "$lite"
      stop "$lite"
    fi
    order="$BUILDS"
    if [ $((round % 2)) = 0 ]; then order="$(tr ' ' '\n' <<<"$BUILDS" | tac | tr '\n' ' ')"; fi
    for build in $order; do
      settle
      SHALE_LOG=warn "${build#*:}/shale" serve --http 127.0.0.1:18091 --grpc 127.0.0.1:18092 \
        --data-dir "$(data_dir "shale-$round-${build%%:*}")" >"$work/shale.log" 2>&1 &
      shale=$!
      wait_port 18091 600
      s2_bench_cpu "${build%%:*}, round $round" http://127.0.0.1:18091 "$shale"
      stop "$shale"
    done
  done
else
  echo "# 1. skipped: no s2 CLI (cargo install --locked s2-cli; S2=path)"
fi

# serve_paths DIR NAME [WRAPPER...]: DIR's `shale serve --kafka` with compaction off on a
# new data directory NAME, under WRAPPER (e.g. valgrind); its pid in $server.
printf '[compactor]\nenabled = false\n' >"$work/paths.toml"
serve_paths() {
  local dir="$1" data
  data="$(data_dir "$2")"
  shift 2
  SHALE_LOG=warn "$@" "$dir/shale" serve --config "$work/paths.toml" --data-dir "$data" --http 127.0.0.1:18191 \
    --grpc 127.0.0.1:18192 --kafka 127.0.0.1:18193 >"$work/paths.log" 2>&1 &
  server=$!
  # Under valgrind the start takes a while.
  wait_ready http://127.0.0.1:18191 1200
}
# run_path PATH MIB [NAME]: one path of shale-cpu-bench; the reads read what s2s-append
# wrote. The JSON line gets NAME as its build.
run_path() {
  local stream="$1"
  case "$1" in *-read) stream=s2s-append ;; esac
  $B/shale-cpu-bench --url http://127.0.0.1:18191 --grpc http://127.0.0.1:18192 --server-pid "$server" \
    --path "$1" --stream "$stream" --mib "$2" | sed "s/^{/{\"build\":\"${3:-}\",/"
}
kafka_paths() {
  $B/shale-kafka-bench --bootstrap 127.0.0.1:18193 --metrics-url http://127.0.0.1:18191 --server-pid "$server" \
    --partitions 1 --idempotence false --seconds "$1"
}
paths="s2s-append json-append s2s-read sse-read grpc-read"
# bench_bin BUILD NAME: the build's own copy of an in-process bench (compaction and tiering
# link the build's crates), else this tree's.
bench_bin() {
  if [ -x "${1#*:}/$2" ]; then echo "${1#*:}/$2"; else echo "$B/$2"; fi
}
# instructions_line BUILD NAME MIB DUMP: the instructions a callgrind profile counts (its
# last `totals`; a profile dumped after its counters were zeroed counts from the zeroing)
# and per GiB of MIB.
instructions_line() {
  awk -v build="${1%%:*}" -v name="$2" -v mib="$3" '/^(summary|totals):/ { ir = $2 } END {
    printf "== %s %s: %.1f MiB, %.3g instructions, %.3g per GiB\n", build, name, mib, ir, ir / (mib / 1024) }' "$4"
}
# callgrind_phase BUILD BENCH PHASE MIB_PATTERN ARGS...: BENCH under callgrind, the
# instructions of the phase it marks (it zeroes the counters before the phase and dumps
# them after, named PHASE: `bench/src/callgrind.rs`) per GiB of the MiB its output's line
# matching MIB_PATTERN names.
callgrind_phase() {
  local build="$1" bench="$2" phase="$3" pattern="$4" out mib dump
  shift 4
  rm -f "$work"/phase.out*
  # At most 30 minutes: a build whose gateway spins under valgrind (the filing build of
  # #39's section in docs/benchmarks.md) never reaches its pass.
  out="$(timeout 1800 valgrind --tool=callgrind --callgrind-out-file="$work/phase.out" --dump-instr=no \
    "$(bench_bin "$build" "$bench")" "$@" 2>/dev/null || true)"
  mib="$(sed -nE "s/$pattern/\1/p" <<<"$out" | head -1)"
  dump="$(grep -l "^desc: Trigger: Client Request: $phase" "$work"/phase.out.* 2>/dev/null | head -1 || true)"
  if [ -z "$dump" ]; then
    echo "== ${build%%:*} $phase: no profile (the bench ended before the phase did)"
    return
  fi
  instructions_line "$build" "$phase" "$mib" "$dump"
}

if [ "$MIB" = 0 ]; then
  echo "# 2. and 3. skipped (MIB=0)"
  exit 0
fi
echo "# 2. each path alone, $MIB MiB, compaction off: server CPU seconds per GiB"
for round in $(seq "$ROUNDS"); do
  for build in $BUILDS; do
    settle
    serve_paths "${build#*:}" "paths-$round-${build%%:*}"
    for path in s2s-produce $paths; do run_path "$path" "$MIB" "${build%%:*}"; done
    kafka_paths 5 | sed "s/^{/{\"build\":\"${build%%:*}\",/"
    stop "$server"
  done
done
for build in $BUILDS; do
  echo "== ${build%%:*}: compaction and tiering in process"
  "$(bench_bin "$build" shale-lifecycle-bench)" --streams 64 --mib "$MIB" | grep -E '^compaction'
  "$(bench_bin "$build" shale-tiering-bench)" --mib "$MIB" | grep -E '^(tiering|CPU)'
done

if [ "$CALLGRIND_MIB" = 0 ] || ! command -v valgrind >/dev/null; then
  echo "# 3. skipped (CALLGRIND_MIB=0 or no valgrind)"
  exit 0
fi
echo "# 3. under callgrind, $CALLGRIND_MIB MiB each: instructions per GiB"
for build in $BUILDS; do
  serve_paths "${build#*:}" "callgrind-${build%%:*}" valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --dump-instr=no
  for path in $paths kafka; do
    callgrind_control -z "$server" >/dev/null 2>&1
    if [ "$path" = kafka ]; then kafka_paths 3 >"$work/path.json"; else run_path "$path" "$CALLGRIND_MIB" >"$work/path.json"; fi
    callgrind_control -d "$path" "$server" >/dev/null 2>&1
    dump="$(ls -t "$work"/cg.out.* | head -1)"
    # Kafka's bench produces, then reads everything back: its figure is per GiB produced
    # and fetched.
    mib="$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(d["mib"] if "mib" in d else d["produce"]["records"] * d["record_bytes"] / 1048576)' "$work/path.json")"
    instructions_line "$build" "$path" "$mib" "$dump"
    rm -f "$work"/cg.out.*
  done
  stop "$server"
  callgrind_phase "$build" shale-lifecycle-bench compaction '^compaction: ([0-9.]+) MiB read.*' \
    --streams 64 --mib "$CALLGRIND_MIB"
  callgrind_phase "$build" shale-tiering-bench tiering '^tiering: .*\(([0-9.]+) MiB in .*' --mib "$CALLGRIND_MIB"
done
INNER
