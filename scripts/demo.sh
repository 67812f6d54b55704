#!/usr/bin/env bash
# The end-to-end demo: installs what is missing, builds, starts a throwaway RabbitMQ and
# PostgreSQL, applies the schema, starts the four workers and a sample worker, publishes jobs
# that succeed, retry and get dead-lettered, computes a natal chart through the chart-worker,
# buys and spends a report credit, writes, illustrates and reads a children's story, shows what
# became of them all, and stops everything.
# Exit status 0 means every step did what it should.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" != "--inside-stack" ]; then
    bash scripts/stack.sh install
    echo "==> building (debug)"
    swift build --product astroctl >/dev/null
    swift build >/dev/null
    exec bash scripts/stack.sh run -- bash "$0" --inside-stack
fi

bin=$(swift build --show-bin-path)
astroctl="$bin/astroctl"
logs=$ASTRO_STACK_DIR/logs
mkdir -p "$logs"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # name port
    for _ in $(seq 1 300); do
        if body=$(curl -fsS "http://127.0.0.1:$2/readyz" 2>/dev/null); then echo "    $1 /readyz: $body"; return 0; fi
        sleep 0.1
    done
    echo "demo: $1 did not become ready; its log:" >&2; tail -20 "$logs/$1.log" >&2; return 1
}
job_status() { "$astroctl" job "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'; }
wait_status() { # jobId expected
    for _ in $(seq 1 200); do
        [ "$(job_status "$1" 2>/dev/null || true)" = "$2" ] && return 0
        sleep 0.1
    done
    echo "demo: job $1 did not reach status $2" >&2; "$astroctl" job "$1" >&2 || true; return 1
}

echo "==> astroctl migrate (as the schema owner; it also lets each worker's own database role log in)"
export CHART_WORKER_DB_PASSWORD=demo-chart REPORT_WORKER_DB_PASSWORD=demo-report BILLING_WORKER_DB_PASSWORD=demo-billing
export STORY_WORKER_DB_PASSWORD=demo-story
"$astroctl" migrate
# Each worker connects as its own least-privilege role, as docker compose and Kubernetes do.
role_url() { echo "$DATABASE_URL" | sed -E "s#//[^@]*@#//$1:$2@#"; }
url_chart_worker=$(role_url astro_chart_worker "$CHART_WORKER_DB_PASSWORD")
url_report_worker=$(role_url astro_report_worker "$REPORT_WORKER_DB_PASSWORD")
url_billing_worker=$(role_url astro_billing_worker "$BILLING_WORKER_DB_PASSWORD")
url_story_worker=$(role_url astro_story_worker "$STORY_WORKER_DB_PASSWORD")
url_sample_worker=$DATABASE_URL

echo "==> a development PKI for signing test purchases (the billing-worker trusts it instead of Apple's root)"
pki=$ASTRO_STACK_DIR/dev-pki
"$astroctl" billing dev-pki --out "$pki"

echo "==> starting chart-worker, report-worker, billing-worker, story-worker (each on its own database role) and a sample worker"
export HTTP_HOST=127.0.0.1 LOG_FORMAT=json MAX_ATTEMPTS=3 RETRY_INITIAL_DELAY_MS=300 RETRY_MAX_DELAY_MS=1200
export BILLING_ENVIRONMENT=Sandbox BILLING_TRUSTED_ROOTS=$pki/root.der
export STORY_STORAGE_ROOT=$ASTRO_STACK_DIR/story-illustrations
for worker in chart-worker report-worker billing-worker story-worker sample-worker; do
    port=$(free_port)
    url_var="url_${worker//-/_}"
    DATABASE_URL=${!url_var} MIGRATE_ON_START=false HTTP_PORT=$port SAMPLE_QUEUE=demo.sample \
        "$bin/$worker" >"$logs/$worker.log" 2>&1 &
    pids+=($!)
    eval "port_${worker//-/_}=$port"
done
wait_ready chart-worker "$port_chart_worker"
wait_ready report-worker "$port_report_worker"
wait_ready billing-worker "$port_billing_worker"
wait_ready story-worker "$port_story_worker"
wait_ready sample-worker "$port_sample_worker"

echo "==> publishing three sample jobs: one that succeeds, one that fails twice then succeeds, one invalid"
ok=$(echo '{"note":"hello from the demo"}' | "$astroctl" publish demo.sample --any-type)
flaky=$(echo '{"note":"flaky","failUntilAttempt":2}' | "$astroctl" publish demo.sample --any-type)
bad=$(echo '{"note":"poison","reject":"demo-invalid"}' | "$astroctl" publish demo.sample --any-type)
wait_status "$ok" succeeded
wait_status "$flaky" succeeded
wait_status "$bad" dead
for id in "$ok" "$flaky" "$bad"; do echo; "$astroctl" job "$id"; done

echo
echo "==> queues (the invalid job waits in demo.sample.dead with its reason)"
"$astroctl" queues --queue demo.sample --queue demo.sample.dead

echo
echo "==> a natal chart through the chart-worker (astroctl chart --publish --wait)"
user=$(python3 -c 'import uuid; print(uuid.uuid4())')
"$astroctl" chart --publish --wait --user "$user" --name "Demo" \
    --date 1990-10-07 --time 15:00 --tz Europe/Kyiv --lat 50.4501 --lon 30.5234 --location "Kyiv, Ukraine"
profile=$(psql "$DATABASE_URL" -Atc "SELECT id FROM user_profiles WHERE user_id = '$user'")

echo
echo "==> credits before buying"
"$astroctl" billing credits --user "$user"
echo
echo "==> a dev-signed purchase of a career report, verified by the billing-worker"
"$astroctl" billing purchase --user "$user" --dev-pki "$pki" --product com.astrosvitla.astroinsight.report.career
"$astroctl" billing credits --user "$user"
echo
echo "==> a forged purchase (signed by a PKI nobody trusts) is rejected and grants nothing"
"$astroctl" billing dev-pki --out "$ASTRO_STACK_DIR/rogue-pki"
"$astroctl" billing dev-sign --pki "$ASTRO_STACK_DIR/rogue-pki" --product com.astrosvitla.report.credit.pack10 \
    --user "$user" >"$ASTRO_STACK_DIR/forged.jws"
if "$astroctl" billing purchase --user "$user" --signed-transaction-file "$ASTRO_STACK_DIR/forged.jws"; then
    echo "demo: a forged purchase was accepted" >&2; exit 1
fi
"$astroctl" billing verify --root "$pki/root.der" <"$ASTRO_STACK_DIR/forged.jws"
echo
echo "==> a Ukrainian career report requested: the billing-worker spends the credit, the report-worker writes it"
"$astroctl" report request --user "$user" --profile "$profile" --area career --language uk --wait
echo
"$astroctl" billing credits --user "$user"
"$astroctl" billing ledger --user "$user"

echo
echo "==> Magical Stories: a story written by the story-worker (built-in writer), then illustrated page by page"
"$astroctl" stories generate --user "$user" --child Mia --tz Europe/Kyiv --hero "Felix the Fox" \
    --theme courage --age 0 --pages 4 --wait | tee "$ASTRO_STACK_DIR/story.txt"
story=$(awk '$1 == "story" { print $2; exit }' "$ASTRO_STACK_DIR/story.txt")
"$astroctl" stories illustrate "$story" --wait
ls -l "$STORY_STORAGE_ROOT/$story"
echo
echo "==> read on three evenings in Kyiv: a 3-day streak in the child's own days"
for ago in 3 2 1; do
    "$astroctl" stories read "$story" --at "$(date -u -d "$ago days ago" +%Y-%m-%dT17:30:00Z)"
done
child=$(psql "$DATABASE_URL" -Atc "SELECT child_profile_id FROM stories.stories WHERE id = '$story'")
"$astroctl" stories achievements --child "$child"

echo
echo "==> sample-worker metrics"
curl -fsS "http://127.0.0.1:$port_sample_worker/metrics" | grep -E '^astro_(jobs_total|job_retries_total|dead_letters_total)'

echo
echo "==> stopping the workers (SIGTERM: graceful shutdown)"
cleanup
pids=()
echo "demo: done"
