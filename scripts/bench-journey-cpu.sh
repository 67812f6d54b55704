#!/usr/bin/env bash
# What one journey (POST /v1/profiles → chart.calculated on the user's SSE stream) costs in CPU,
# per process: the figure that decides the journey's throughput on a small machine, and one that
# stays honest while other work shares the machine (a throughput figure does not).
#
#   bash scripts/bench-journey-cpu.sh [RUNS] [RATE] [SECONDS]    defaults: 3 runs, 300/s, 15 s
#   bash scripts/bench-journey-cpu.sh [RUNS] 0 [SECONDS]         idle: CPU ms per second, no load
#
# Same set-up as scripts/bench-gateway.sh (release gateway, two release chart-workers, the local
# stack with its default settings). Each run offers RATE journeys/s for SECONDS and prints the
# CPU milliseconds per completed journey of PostgreSQL (the postmaster and its backends, exited
# ones included), RabbitMQ (its Erlang VM), the gateway, the chart-workers and the load
# generator, their sum, and what that sum allows on 2 cores (2,000 core-ms per second / sum),
# and PostgreSQL's WAL per journey (pg_stat_wal: bytes, records, full-page images), which does
# not depend on how busy the machine is. RATE 0 measures the idle cost instead: the same
# processes, started and then left alone (after 5 s to settle) for SECONDS, and the CPU
# milliseconds each group spends per second and the statements PostgreSQL runs per second.
# Environment: PGSS=1 also prints PostgreSQL's most expensive statements (pg_stat_statements,
# preloaded through ASTRO_PG_OPTIONS); ASTRO_PG_OPTIONS passes other server settings;
# BENCH_BINS="DIR1 DIR2 …" compares builds (folders holding gateway, chart-worker and astroctl):
# each run starts each build's processes in turn on the same servers, so a machine busy with
# other work weighs on each alike; SKIP_BUILD=1 skips the release build;
# PERF_OUT=FILE records a system-wide `perf` profile (call graphs) of each run into FILE;
# BENCH_LOAD="GEN1 GEN2 …" compares load generators (scripts with gateway-load.py's interface),
# each in turn after the other on the same servers (default scripts/gateway-load.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" != "--inside-stack" ]; then
    runs=${1:-3} rate=${2:-300} seconds=${3:-15}
    for value in "$runs" "$seconds"; do
        case $value in '' | *[!0-9]* | 0) echo "bench-journey-cpu: RUNS and SECONDS must be positive whole numbers" >&2; exit 2 ;; esac
    done
    case $rate in '' | *[!0-9]*) echo "bench-journey-cpu: RATE must be a whole number (0: idle)" >&2; exit 2 ;; esac
    bash scripts/stack.sh install
    if [ -z "${SKIP_BUILD:-}" ]; then
        echo "==> building gateway, chart-worker and astroctl (release)"
        for product in gateway chart-worker astroctl; do swift build -c release --product "$product" >/dev/null; done
    fi
    if [ -n "${PGSS:-}" ]; then
        export ASTRO_PG_OPTIONS="${ASTRO_PG_OPTIONS:-} -c shared_preload_libraries=pg_stat_statements"
    fi
    export BENCH_RUNS=$runs BENCH_RATE=$rate BENCH_SECONDS=$seconds
    exec bash scripts/stack.sh run -- bash "$0" --inside-stack
fi

logs=$ASTRO_STACK_DIR/logs
mkdir -p "$logs"
pids=()
stop_services() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}
trap stop_services EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
role_url() { echo "$DATABASE_URL" | sed -E "s#//[^@]*@#//$1:$2@#"; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

export CHART_WORKER_DB_PASSWORD=bench-chart GATEWAY_DB_PASSWORD=bench-gateway
# Starts the gateway and two chart-workers of the binaries in folder $1, and 50 users.
start_services() {
    local bin=$1
    worker_pids=()
    for i in 1 2; do
        DATABASE_URL=$(role_url astro_chart_worker "$CHART_WORKER_DB_PASSWORD") AMQP_URL=$CHART_WORKER_AMQP_URL \
            MIGRATE_ON_START=false HTTP_HOST=127.0.0.1 HTTP_PORT=0 LOG_LEVEL=warning \
            "$bin/chart-worker" >>"$logs/chart-worker-$i.log" 2>&1 &
        pids+=($!)
        worker_pids+=($!)
    done
    local port
    port=$(free_port)
    DATABASE_URL=$(role_url astro_gateway "$GATEWAY_DB_PASSWORD") AMQP_URL=${GATEWAY_AMQP_URL:-$CLIENT_AMQP_URL} \
        HTTP_HOST=127.0.0.1 HTTP_PORT=$port LOG_LEVEL=warning \
        RATE_LIMIT_USER_PER_SECOND=1000000 RATE_LIMIT_USER_BURST=1000000 \
        RATE_LIMIT_IP_PER_SECOND=1000000 RATE_LIMIT_IP_BURST=1000000 RATE_LIMIT_REGISTER_PER_MINUTE=1000000 \
        "$bin/gateway" >>"$logs/gateway.log" 2>&1 &
    gateway_pid=$!
    pids+=($gateway_pid)
    base=http://127.0.0.1:$port
    for _ in $(seq 1 300); do curl -fsS "$base/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    curl -fsS "$base/readyz" >/dev/null || { echo "bench-journey-cpu: the gateway is not ready" >&2; tail "$logs/gateway.log" >&2; exit 1; }
    tokens=$ASTRO_STACK_DIR/tokens.txt
    for _ in $(seq 1 50); do curl -fsS -X POST "$base/v1/devices" | json_field '["accessToken"]'; done >"$tokens"
}

# BENCH_BINS: folders of binaries to compare, run in turn within each run (same servers, same
# moment, so a busy machine weighs on each alike); default the release build.
read -r -a variants <<<"${BENCH_BINS:-$(swift build -c release --show-bin-path)}"
"${variants[0]}/astroctl" migrate >/dev/null
postmaster=$(head -1 "$ASTRO_STACK_DIR/pg/data/postmaster.pid")
beam=$(cat "$ASTRO_STACK_DIR/rabbit/rabbit.pid")

# CPU seconds so far of each group: a group is a process and its descendants (plus, for the
# postmaster, the backends that have exited and been waited for).
snapshot() {
    python3 - "$postmaster" "$beam" "$gateway_pid" "${worker_pids[@]}" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK")
postmaster, beam, gateway, *workers = (int(p) for p in sys.argv[1:])
stat, children = {}, {}
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        fields = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    pid = int(name)
    stat[pid] = fields
    children.setdefault(int(fields[1]), []).append(pid)

def tree(root, waited=False):
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid not in stat:
            continue
        f = stat[pid]
        total += (int(f[11]) + int(f[12])) / hz
        if waited and pid == root:
            total += (int(f[13]) + int(f[14])) / hz
        todo.extend(children.get(pid, []))
    return total

print(repr({"postgres": tree(postmaster, waited=True), "rabbitmq": tree(beam),
            "gateway": tree(gateway), "chart-workers": sum(tree(w) for w in workers)}))
PY
}

# Statements PostgreSQL has run so far, all databases (its own statistics, no extension needed).
statements() { psql "$DATABASE_URL" -Atc "SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database"; }

if [ "$BENCH_RATE" = 0 ]; then
    echo "==> idle for ${BENCH_SECONDS} s, ${BENCH_RUNS} runs: CPU ms per second, transactions per second"
    for run in $(seq 1 "$BENCH_RUNS"); do
        for bin in "${variants[@]}"; do
            start_services "$bin"
            sleep 5
            before=$(snapshot) transactions_before=$(statements)
            sleep "$BENCH_SECONDS"
            after=$(snapshot) transactions_after=$(statements)
            python3 - "$before" "$after" "$BENCH_SECONDS" "$bin" "$transactions_before" "$transactions_after" <<'PY'
import ast, sys
before, after, seconds = ast.literal_eval(sys.argv[1]), ast.literal_eval(sys.argv[2]), float(sys.argv[3])
cost = {k: 1000 * (after[k] - before[k]) / seconds for k in after}
# The two psql calls of the measurement are its own two transactions.
transactions = (int(sys.argv[6]) - int(sys.argv[5]) - 1) / seconds
print(f"  [{sys.argv[4]}] idle core-ms/s: " + ", ".join(f"{k} {v:.2f}" for k, v in cost.items())
      + f"; PostgreSQL {transactions:.2f} transactions/s (gateway and two chart-workers)")
PY
            stop_services
        done
    done
    exit 0
fi

if [ -n "${PGSS:-}" ]; then psql "$DATABASE_URL" -qc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null; fi
echo "==> journeys at ${BENCH_RATE}/s for ${BENCH_SECONDS} s, 50 users, ${BENCH_RUNS} runs: CPU ms per journey"
for run in $(seq 1 "$BENCH_RUNS"); do
    # Each variant in turn, the order reversed every other run (the tables grow as runs go).
    order=("${variants[@]}")
    if [ $((run % 2)) -eq 0 ]; then order=(); for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[i]}"); done; fi
    for bin in "${order[@]}"; do
    read -r -a generators <<<"${BENCH_LOAD:-scripts/gateway-load.py}"
    for generator in "${generators[@]}"; do
    start_services "$bin"
    if [ -n "${PGSS:-}" ]; then psql "$DATABASE_URL" -qc "SELECT pg_stat_statements_reset()" >/dev/null; fi
    wal_before=$(psql "$DATABASE_URL" -Atc "SELECT wal_bytes || ' ' || wal_records || ' ' || wal_fpi FROM pg_stat_wal")
    before=$(snapshot)
    if [ -n "${PERF_OUT:-}" ]; then
        perf record -q -F 499 -a -g -o "$PERF_OUT" -- sleep "$BENCH_SECONDS" >/dev/null 2>&1 &
    fi
    result=$(python3 "$generator" journey --base "$base" --tokens "$tokens" \
        --rate "$BENCH_RATE" --seconds "$BENCH_SECONDS" --connections 64)
    after=$(snapshot)
    wal_after=$(psql "$DATABASE_URL" -Atc "SELECT wal_bytes || ' ' || wal_records || ' ' || wal_fpi FROM pg_stat_wal")
    label=$bin
    if [ -n "${BENCH_LOAD:-}" ]; then label="$bin, $generator"; fi
    echo "  [$label] $result"
    python3 - "$before" "$after" "$result" "$label" "$wal_before" "$wal_after" <<'PY'
import ast, json, sys
before, after, result = ast.literal_eval(sys.argv[1]), ast.literal_eval(sys.argv[2]), json.loads(sys.argv[3])
wal = [int(b) - int(a) for a, b in zip(sys.argv[5].split(), sys.argv[6].split())]
done = max(1, result["completed"])
cost = {k: 1000 * (after[k] - before[k]) / done for k in after}
cost["generator"] = 1000 * result["generator_cpu_s"] / done
total = sum(cost.values())
print(f"  [{sys.argv[4]}] core-ms/journey: " + ", ".join(f"{k} {v:.2f}" for k, v in cost.items())
      + f"; total {total:.2f} → {2000 / total:.0f} journeys/s on 2 cores"
      + f" ({result['completed']} journeys, {result['missing']} missing, {result['errors']} errors)")
print(f"  [{sys.argv[4]}] WAL per journey: {wal[0] / done:.0f} bytes, {wal[1] / done:.1f} records,"
      f" {wal[2] / done:.2f} full-page images")
PY
    if [ -n "${PGSS:-}" ]; then
        psql "$DATABASE_URL" -Atc "SELECT round(total_exec_time::numeric, 0) || ' ms, ' || calls || ' calls, ' || rows || ' rows: ' || left(regexp_replace(query, '\s+', ' ', 'g'), 160) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12" | sed 's/^/      /'
    fi
    stop_services
    done
    done
done
