#!/usr/bin/env bash
# The Docker-free local S3 server CI uses: moto, in a virtualenv at .venv.
#   localstack/s3-local.sh install      create .venv with moto's S3 server and the Python clients tests use,
#                                       and .venv-quix with Quix Streams (about 90 s)
#   localstack/s3-local.sh start PORT   run it on 127.0.0.1:PORT in the foreground
# Tests start their own moto from .venv; this is for running Shale against S3 by hand:
#   AWS_ENDPOINT_URL=http://127.0.0.1:PORT AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
#     shale serve --store s3://my-bucket/shale     (create the bucket first: curl -X PUT http://127.0.0.1:PORT/my-bucket)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
case "${1:-}" in
  install)
    if [ ! -x "$venv/bin/moto_server" ]; then
      python3 -m venv "$venv"
      "$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[s3]==5.*' flask flask-cors
    fi
    # The gRPC stubs test generates Python code from proto/ with grpcio-tools and decodes
    # error details with grpcio-status; the metrics test parses /metrics with
    # prometheus-client; the table tier is read back with DuckDB and pyiceberg (with
    # pyarrow, whose S3 file system DuckDB is given for s3:// paths); the Kafka tests run
    # confluent-kafka (its wheel bundles librdkafka), kafka-python with its codecs and
    # aiokafka.
    if ! "$venv/bin/python" -c 'import grpc_tools, grpc_status, prometheus_client, duckdb, pyiceberg, pyarrow, fsspec, confluent_kafka, kafka, lz4, cramjam, zstandard, aiokafka' 2>/dev/null; then
      "$venv/bin/pip" install --quiet --disable-pip-version-check 'grpcio-tools==1.*' 'grpcio-status==1.*' \
        'prometheus-client==0.*' 'duckdb==1.*' 'pyiceberg[pyarrow]==0.*' 'confluent-kafka==2.*' \
        'kafka-python[lz4,snappy,zstd]==3.*' 'aiokafka==0.*'
    fi
    # Quix Streams pins confluent-kafka below the version the other Kafka tests run, so it
    # has a virtualenv of its own.
    if [ ! -x "$root/.venv-quix/bin/python" ] || ! "$root/.venv-quix/bin/python" -c 'import quixstreams' 2>/dev/null; then
      python3 -m venv "$root/.venv-quix"
      "$root/.venv-quix/bin/pip" install --quiet --disable-pip-version-check 'quixstreams==3.*'
    fi
    "$venv/bin/moto_server" --help >/dev/null
    echo "moto installed at $venv/bin/moto_server"
    ;;
  start)
    exec "$venv/bin/moto_server" -H 127.0.0.1 -p "${2:?usage: s3-local.sh start PORT}"
    ;;
  *)
    echo "usage: $0 install | start PORT" >&2
    exit 2
    ;;
esac
