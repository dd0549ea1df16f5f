#!/usr/bin/env bash
# Runs every test: installs the local S3 server (moto) into .venv if needed, then the
# whole workspace under nextest (tests that need S3 start their own moto from .venv),
# then every fuzz target for 10 s (scripts/fuzz.sh; its first build takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash localstack/s3-local.sh install
cargo nextest run --workspace --no-fail-fast
scripts/fuzz.sh 10
