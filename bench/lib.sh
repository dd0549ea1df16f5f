# Shared by the bench scripts (sourced): the local S3 server and waiting for a role.

# start_moto PORT LOG: starts moto from .venv on 127.0.0.1:PORT, waits until it answers.
start_moto() {
  .venv/bin/moto_server -H 127.0.0.1 -p "$1" >"$2" 2>&1 &
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "moto on port $1 never answered" >&2; exit 1
}

# serve_kafka DIR DELAY [SHALE]: starts `shale serve` (the binary SHALE, by default
# target/release/shale) with Kafka (HTTP 127.0.0.1:18480, gRPC 18451, Kafka 18492) on a
# fresh data directory DIR/data with DELAY added to every store request, waits until it
# is ready; its pid is in $pid.
serve_kafka() {
  rm -rf "$1/data"
  SHALE_LOG=warn "${3:-target/release/shale}" serve --data-dir "$1/data" --store-delay "$2" --http 127.0.0.1:18480 \
    --grpc 127.0.0.1:18451 --kafka 127.0.0.1:18492 >"$1/serve.log" 2>&1 &
  pid=$!
  wait_ready http://127.0.0.1:18480
}

# wait_port PORT [TRIES]: waits until 127.0.0.1:PORT accepts connections, TRIES x 0.1 s
# (default 100).
wait_port() {
  for _ in $(seq "${2:-100}"); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "port $1 never opened" >&2; exit 1
}

# wait_ready URL [TRIES]: waits until URL/ready answers, TRIES x 0.1 s (default 200).
wait_ready() {
  for _ in $(seq "${2:-200}"); do curl -sf "$1/ready" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$1 never became ready" >&2; exit 1
}
