#!/usr/bin/env bash
# Runs every fuzz target in fuzz/ for SECONDS each (default 60): the segment decoder, S2S
# frames, protobuf and JSON request bodies, read queries, Kafka requests and batches.
# Installs cargo-fuzz if needed.
# The toolchain is stable, so its unstable flags are allowed with RUSTC_BOOTSTRAP; no
# sanitizer (a panic is what the targets look for). A crash fails the run and leaves the
# input under fuzz/artifacts/<target>/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(segment s2s_frames protobuf_append json_bodies read_query kafka_requests kafka_batches)
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for target in "${targets[@]}"; do
  echo "fuzzing $target for ${seconds}s"
  if ! cargo fuzz run --sanitizer none "$target" -- -max_total_time="$seconds" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz target $target failed; its input is under fuzz/artifacts/$target/" >&2
    exit 1
  fi
  grep -E "^Done" "$log" || true
done
