#!/usr/bin/env bash
# The gateway's benchmark (issue 16): a release build of the gateway in front of two release
# chart-workers on the local stack, loaded over HTTP on loopback.
#
#   bash scripts/bench-gateway.sh [RUNS]      each measurement RUNS times (default 3)
#
# Measured, each printed as JSON lines and summarised at the end:
#   1. authenticated GET /v1/profiles/{id}/chart, as fast as wrk can ask (2 threads, 64
#      connections, 15 s): requests/s and wrk's latency percentiles;
#   2. the same GET offered at a fixed 1,000 req/s (scripts/gateway-load.py get): p99 measured
#      from when each request was due;
#   3. the journey POST /v1/profiles → chart.calculated on the user's SSE stream, for 50 users:
#      at a fixed 200/s offered (p99), and offered 1,200/s (what is sustained);
#   4. the gateway's peak resident memory (VmHWM) over all of it.
# Everything runs with the defaults users get, except the rate limits, which are raised: a load
# generator on one address is exactly what they exist to stop (see README, "Abuse limits").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" != "--inside-stack" ]; then
    runs=${1:-3}
    case $runs in '' | *[!0-9]* | 0) echo "bench-gateway: RUNS must be a positive whole number" >&2; exit 2 ;; esac
    bash scripts/stack.sh install
    command -v wrk >/dev/null || {
        echo "==> installing wrk (Debian)"
        sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
        $sudo apt-get install -y -qq wrk >/dev/null || { $sudo apt-get update -qq && $sudo apt-get install -y -qq wrk >/dev/null; }
    }
    echo "==> building gateway, chart-worker and astroctl (release)"
    for product in gateway chart-worker astroctl; do swift build -c release --product "$product" >/dev/null; done
    export BENCH_RUNS=$runs
    exec bash scripts/stack.sh run -- bash "$0" --inside-stack
fi

bin=$(swift build -c release --show-bin-path)
logs=$ASTRO_STACK_DIR/logs
mkdir -p "$logs"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
role_url() { echo "$DATABASE_URL" | sed -E "s#//[^@]*@#//$1:$2@#"; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
# CPU seconds (user + system) a process has used so far.
rss() { echo "    gateway memory: $(awk '/VmRSS|VmHWM/ {printf "%s %s kB  ", $1, $2}' "/proc/$gateway_pid/status")"; }
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$1/stat"; }

export CHART_WORKER_DB_PASSWORD=bench-chart GATEWAY_DB_PASSWORD=bench-gateway
"$bin/astroctl" migrate >/dev/null
worker_pids=()
for i in 1 2; do
    DATABASE_URL=$(role_url astro_chart_worker "$CHART_WORKER_DB_PASSWORD") AMQP_URL=$CHART_WORKER_AMQP_URL \
        MIGRATE_ON_START=false HTTP_HOST=127.0.0.1 HTTP_PORT=0 LOG_LEVEL=warning \
        "$bin/chart-worker" >"$logs/chart-worker-$i.log" 2>&1 &
    pids+=($!)
    worker_pids+=($!)
done
port=$(free_port)
metrics_port=$(free_port)
DATABASE_URL=$(role_url astro_gateway "$GATEWAY_DB_PASSWORD") AMQP_URL=${GATEWAY_AMQP_URL:-$CLIENT_AMQP_URL} \
    HTTP_HOST=127.0.0.1 HTTP_PORT=$port GATEWAY_METRICS_PORT=$metrics_port LOG_LEVEL=warning \
    RATE_LIMIT_USER_PER_SECOND=1000000 RATE_LIMIT_USER_BURST=1000000 \
    RATE_LIMIT_IP_PER_SECOND=1000000 RATE_LIMIT_IP_BURST=1000000 RATE_LIMIT_REGISTER_PER_MINUTE=1000000 \
    "$bin/gateway" >"$logs/gateway.log" 2>&1 &
gateway_pid=$!
pids+=($gateway_pid)
base=http://127.0.0.1:$port
for _ in $(seq 1 300); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS "$base/readyz" >/dev/null || { echo "bench-gateway: the gateway is not ready" >&2; tail "$logs/gateway.log" >&2; exit 1; }

token=$(curl -fsS -X POST "$base/v1/devices" | json_field '["accessToken"]')
job=$(curl -fsS -X POST "$base/v1/profiles" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"profile":{"name":"Bench","birthDate":"1990-10-07","birthTime":"15:00","timezone":"Europe/Kyiv","latitude":50.4501,"longitude":30.5234,"locationName":"Kyiv, Ukraine"}}' |
    json_field '["jobId"]')
profile=$(curl -fsS "$base/v1/jobs/$job?wait=10" -H "Authorization: Bearer $token" | json_field '["result"]["profileId"]')
chart_url=$base/v1/profiles/$profile/chart
curl -fsS -o /dev/null -w 'GET chart: %{http_code}, %{size_download} bytes\n' -H "Authorization: Bearer $token" "$chart_url"

runs=$BENCH_RUNS
echo "==> 1. GET /v1/profiles/{id}/chart, wrk -t2 -c64 -d15s ($runs runs)"
for _ in $(seq 1 "$runs"); do
    wrk -t2 -c64 -d15s --latency -H "Authorization: Bearer $token" "$chart_url" |
        awk '/Requests\/sec/ {rps=$2} /^ +99%/ {p99=$2} /^ +50%/ {p50=$2} /Non-2xx/ {bad=$NF}
             END {printf "{\"mode\":\"wrk\",\"requests_per_s\":%s,\"p50\":\"%s\",\"p99\":\"%s\",\"non_2xx\":%d}\n", rps, p50, p99, bad}'
done
rss
echo "==> 2. the same GET offered at 1,000 req/s for 15 s ($runs runs)"
for _ in $(seq 1 "$runs"); do
    python3 scripts/gateway-load.py get --url "$chart_url" --token "$token" --rate 1000 --seconds 15 --connections 32
done

rss
echo "==> 3. POST /v1/profiles → chart.calculated on SSE, 50 users"
tokens=$ASTRO_STACK_DIR/tokens.txt
for _ in $(seq 1 50); do curl -fsS -X POST "$base/v1/devices" | json_field '["accessToken"]'; done >"$tokens"
for _ in $(seq 1 "$runs"); do
    python3 scripts/gateway-load.py journey --base "$base" --tokens "$tokens" --rate 200 --seconds 15
done
rss
for _ in $(seq 1 "$runs"); do
    before="$(cpu_seconds "$gateway_pid") $(cpu_seconds "${worker_pids[0]}") $(cpu_seconds "${worker_pids[1]}")"
    python3 scripts/gateway-load.py journey --base "$base" --tokens "$tokens" --rate 1200 --seconds 15 --connections 64
    after="$(cpu_seconds "$gateway_pid") $(cpu_seconds "${worker_pids[0]}") $(cpu_seconds "${worker_pids[1]}")"
    echo "$before $after" | awk '{printf "    CPU seconds during the run: gateway %.1f, chart-workers %.1f and %.1f\n", $4-$1, $5-$2, $6-$3}'
done

echo "==> 4. gateway memory (VmHWM: the peak)"
rss
echo "==> 5. the gateway's event-stream counters (a stream closed as too slow loses the events after it)"
curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep -E '^gateway_(event|events)_' || true
