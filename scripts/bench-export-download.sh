#!/usr/bin/env bash
# The gateway's memory while it serves a large export (issue 29, F8): one gateway on the local
# stack, an export of SIZE_MIB MiB of incompressible bytes stored for a registered user straight in
# the database (no worker needed), then RUNS downloads of it with curl while the gateway's
# resident memory is sampled every 20 ms.
#
#   bash scripts/bench-export-download.sh [SIZE_MIB] [RUNS]     (defaults 100 and 3)
#
# Printed per run: the gateway's VmRSS before the download, the highest VmRSS sampled during it,
# the difference, the download's size and time (its SHA-256 is checked against the stored bytes);
# at the end the gateway's VmHWM (its peak).
# Uses the debug build (`swift build --product gateway --product astroctl` first); the memory a
# download costs does not depend on the optimisation level. Works on either storage of the zip:
# the `user_exports.zip` column (before migration 0035) or `user_export_chunks` (after).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" != "--inside-stack" ]; then
    size=${1:-100}
    runs=${2:-3}
    for n in "$size" "$runs"; do
        case $n in '' | *[!0-9]* | 0) echo "bench-export-download: SIZE_MIB and RUNS are positive whole numbers" >&2; exit 2 ;; esac
    done
    export BENCH_SIZE_MIB=$size BENCH_RUNS=$runs
    exec bash scripts/stack.sh run -- bash "$0" --inside-stack
fi

bin=$(swift build --show-bin-path)
logs=$ASTRO_STACK_DIR/logs
mkdir -p "$logs"
gateway_pid=
cleanup() {
    if [ -n "$gateway_pid" ]; then
        kill -TERM "$gateway_pid" 2>/dev/null || true
        wait "$gateway_pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
role_url() { echo "$DATABASE_URL" | sed -E "s#//[^@]*@#//$1:$2@#"; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
status_kb() { awk -v key="$1:" '$1 == key {print $2}' "/proc/$gateway_pid/status"; }

export GATEWAY_DB_PASSWORD=bench-gateway
"$bin/astroctl" migrate >/dev/null
port=$(free_port)
DATABASE_URL=$(role_url astro_gateway "$GATEWAY_DB_PASSWORD") AMQP_URL=${GATEWAY_AMQP_URL:-$CLIENT_AMQP_URL} \
    HTTP_HOST=127.0.0.1 HTTP_PORT=$port LOG_LEVEL=warning \
    "$bin/gateway" >"$logs/gateway.log" 2>&1 &
gateway_pid=$!
base=http://127.0.0.1:$port
for _ in $(seq 1 300); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS "$base/readyz" >/dev/null || { echo "the gateway is not ready" >&2; tail "$logs/gateway.log" >&2; exit 1; }

registered=$(curl -fsS -X POST "$base/v1/devices")
token=$(echo "$registered" | json_field '["accessToken"]')
user=$(echo "$registered" | json_field '["userId"]')
export_id=$(python3 -c 'import uuid; print(uuid.uuid4())')
bytes=$((BENCH_SIZE_MIB << 20))
chunked=$(psql "$DATABASE_URL" -Atc "SELECT to_regclass('user_export_chunks') IS NOT NULL")
echo "==> storing an export of $BENCH_SIZE_MIB MiB (chunked table: $chunked)"
# md5 of random numbers: 16 incompressible bytes per row.
psql "$DATABASE_URL" -q -v ON_ERROR_STOP=1 -c "INSERT INTO user_exports (id, user_id) VALUES ('$export_id', '$user')"
if [ "$chunked" = t ]; then
    psql "$DATABASE_URL" -q -v ON_ERROR_STOP=1 <<SQL
CREATE TEMP TABLE blob AS
    SELECT decode(string_agg(md5(random()::text), '' ORDER BY g), 'hex') AS b
    FROM generate_series(1, $bytes / 16) AS g;
INSERT INTO user_export_chunks (export_id, seq, data)
    SELECT '$export_id', s, substring(b FROM s * 1048576 + 1 FOR 1048576)
    FROM blob, generate_series(0, ($bytes - 1) / 1048576) AS s;
UPDATE user_exports SET bytes = $bytes, ready_at = now(), expires_at = now() + interval '1 hour'
    WHERE id = '$export_id';
SQL
else
    psql "$DATABASE_URL" -q -v ON_ERROR_STOP=1 <<SQL
CREATE TEMP TABLE blob AS
    SELECT decode(string_agg(md5(random()::text), '' ORDER BY g), 'hex') AS b
    FROM generate_series(1, $bytes / 16) AS g;
UPDATE user_exports SET zip = (SELECT b FROM blob), bytes = $bytes, ready_at = now(),
    expires_at = now() + interval '1 hour' WHERE id = '$export_id';
SQL
fi

if [ "$chunked" = t ]; then
    stored_sha=$(psql "$DATABASE_URL" -Atc "SELECT encode(sha256(string_agg(data, ''::bytea ORDER BY seq)), 'hex')
        FROM user_export_chunks WHERE export_id = '$export_id'")
else
    stored_sha=$(psql "$DATABASE_URL" -Atc "SELECT encode(sha256(zip), 'hex') FROM user_exports WHERE id = '$export_id'")
fi
echo "==> $BENCH_RUNS downloads of GET /v1/me/exports/$export_id"
for run in $(seq 1 "$BENCH_RUNS"); do
    before=$(status_kb VmRSS)
    samples=$logs/rss-$run.txt
    : >"$samples"
    (while kill -0 "$gateway_pid" 2>/dev/null; do status_kb VmRSS >>"$samples"; sleep 0.02; done) &
    sampler=$!
    result=$(curl -fsS -o "$logs/download.zip" -w '%{http_code} %{size_download} %{time_total}' \
        -H "Authorization: Bearer $token" "$base/v1/me/exports/$export_id")
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    peak=$(sort -n "$samples" | tail -1)
    read -r code size seconds <<<"$result"
    echo "run $run: HTTP $code, $size bytes in ${seconds}s; VmRSS before $before kB, peak during $peak kB" \
        "(+$(((peak - before) / 1024)) MiB)"
    [ "$size" = "$bytes" ] || { echo "the download is $size bytes, not $bytes" >&2; exit 1; }
    [ "$(sha256sum <"$logs/download.zip" | cut -d' ' -f1)" = "$stored_sha" ] ||
        { echo "the download differs from the stored bytes" >&2; exit 1; }
    sleep 1
done
echo "gateway VmHWM (peak over the whole run): $(status_kb VmHWM) kB; VmRSS now: $(status_kb VmRSS) kB"
