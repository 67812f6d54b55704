#!/usr/bin/env bash
# Gateway memory under connection floods (issue 29, F13): starts a gateway on the local stack
# and floods it with scripts/gateway-connection-flood.py, once per configuration (VARIANTS, space
# separated, picks some):
#   limit        the defaults (GATEWAY_MAX_CONNECTIONS=4096)
#   limit-1024   GATEWAY_MAX_CONNECTIONS=1024
#   no-limit     GATEWAY_MAX_CONNECTIONS=100000 (what the gateway did before the limit)
#   limit+arena  the defaults with MALLOC_ARENA_MAX=2
# REQUEST_TIMEOUT_MS is raised to 60 s (FLOOD_REQUEST_TIMEOUT_MS) so that the flood's idle
# connections are still open when the last one connects: what the limit bounds is how many are
# open at once.
#
#   bash scripts/bench-connection-flood.sh [CONNECTIONS] [RUNS]   (defaults 10000 and 4)
#
# Uses the debug build (`swift build --product gateway`); BIN=<folder> for another one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${1:-}" != "--inside-stack" ]; then
    export FLOOD_CONNECTIONS=${1:-10000} FLOOD_RUNS=${2:-4}
    [ -n "${BIN:-}" ] || { swift build --product gateway >/dev/null; swift build --product astroctl >/dev/null; }
    export BIN=${BIN:-$(swift build --show-bin-path)}
    exec bash scripts/stack.sh run -- bash "$0" --inside-stack
fi
logs=$ASTRO_STACK_DIR/logs
mkdir -p "$logs"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
role_url() { echo "$DATABASE_URL" | sed -E "s#//[^@]*@#//$1:$2@#"; }
export GATEWAY_DB_PASSWORD=bench-gateway
"$BIN/astroctl" migrate >/dev/null
for variant in ${VARIANTS:-limit limit-1024 no-limit limit+arena}; do
    port=$(free_port)
    extra=()
    case $variant in
        limit-1024) extra=(GATEWAY_MAX_CONNECTIONS=1024) ;;
        no-limit) extra=(GATEWAY_MAX_CONNECTIONS=100000) ;;
        limit+arena) extra=(MALLOC_ARENA_MAX=2) ;;
    esac
    env DATABASE_URL="$(role_url astro_gateway "$GATEWAY_DB_PASSWORD")" AMQP_URL="$GATEWAY_AMQP_URL" \
        HTTP_HOST=127.0.0.1 HTTP_PORT="$port" GATEWAY_METRICS_PORT=0 LOG_LEVEL=warning \
        REQUEST_TIMEOUT_MS="${FLOOD_REQUEST_TIMEOUT_MS:-60000}" "${extra[@]}" \
        "$BIN/gateway" >"$logs/gateway-$variant.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    sleep 2
    echo "== $variant (${extra[*]:-defaults})"
    python3 scripts/gateway-connection-flood.py --port "$port" --pid "$pid" \
        --connections "$FLOOD_CONNECTIONS" --runs "$FLOOD_RUNS"
    # Allocator retention or a leak? Ask glibc to give its free memory back (gdb, when there is
    # one): what RSS drops by was free heap malloc kept, not memory the gateway still holds.
    if command -v gdb >/dev/null; then
        held=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
        gdb -p "$pid" -batch -ex 'call (int) malloc_trim(0)' >/dev/null 2>&1 || true
        trimmed=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
        echo "{\"malloc_trim\": true, \"rss_before_mb\": $((held / 1024)), \"rss_after_mb\": $((trimmed / 1024))}"
    fi
    kill -TERM "$pid"
    wait "$pid" || true
done
