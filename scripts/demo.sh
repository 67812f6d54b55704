#!/usr/bin/env bash
# The end-to-end demo: installs what is missing, builds, starts a throwaway RabbitMQ and
# PostgreSQL, applies the schema, starts the four workers and a sample worker, publishes jobs
# that succeed, retry and get dead-lettered, computes a natal chart through the chart-worker,
# buys and spends a report credit, writes, illustrates and reads a children's story, then walks
# the app's journey through the gateway with curl (register, profile, live events over SSE,
# purchase, report, and Apple's refund notification revoking a credit), shows what became of
# them all, and stops everything.
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
export STORY_WORKER_DB_PASSWORD=demo-story GATEWAY_DB_PASSWORD=demo-gateway
"$astroctl" migrate
# Each worker connects as its own least-privilege role, as docker compose and Kubernetes do.
role_url() { echo "$DATABASE_URL" | sed -E "s#//[^@]*@#//$1:$2@#"; }
url_chart_worker=$(role_url astro_chart_worker "$CHART_WORKER_DB_PASSWORD")
url_report_worker=$(role_url astro_report_worker "$REPORT_WORKER_DB_PASSWORD")
url_billing_worker=$(role_url astro_billing_worker "$BILLING_WORKER_DB_PASSWORD")
url_story_worker=$(role_url astro_story_worker "$STORY_WORKER_DB_PASSWORD")
url_sample_worker=$DATABASE_URL
url_gateway=$(role_url astro_gateway "$GATEWAY_DB_PASSWORD")

echo "==> a development PKI for signing test purchases (the billing-worker trusts it instead of Apple's root)"
pki=$ASTRO_STACK_DIR/dev-pki
"$astroctl" billing dev-pki --out "$pki"

echo "==> starting chart-worker, report-worker, billing-worker, story-worker (each on its own database role) and a sample worker"
export HTTP_HOST=127.0.0.1 LOG_FORMAT=json LOG_LEVEL=info MAX_ATTEMPTS=3 RETRY_INITIAL_DELAY_MS=300 RETRY_MAX_DELAY_MS=1200
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
echo "==> the app's journey through the gateway, with curl, as the iOS app makes it"
gateway_port=$(free_port)
# /metrics is served apart from the API, on a port of its own (9464 unless told).
DATABASE_URL=$url_gateway AMQP_URL=$GATEWAY_AMQP_URL HTTP_PORT=$gateway_port GATEWAY_METRICS_PORT=$(free_port) \
    "$bin/gateway" >"$logs/gateway.log" 2>&1 &
pids+=($!)
wait_ready gateway "$gateway_port"
api=http://127.0.0.1:$gateway_port
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }
events=$ASTRO_STACK_DIR/events.txt
wait_event() { # type jobId: the event of that job on the SSE stream
    for _ in $(seq 1 300); do
        if grep -A1 -x "event: $1" "$events" | grep -q "$2"; then
            echo "    SSE: $1 (job $2)"; return 0
        fi
        sleep 0.1
    done
    echo "demo: no $1 event for job $2 on the stream; it holds:" >&2; cat "$events" >&2; return 1
}
echo "--> POST /v1/devices: an anonymous user for this installation"
device=$(curl -fsS -X POST "$api/v1/devices")
app_user=$(echo "$device" | field '["userId"]')
token=$(echo "$device" | field '["accessToken"]')
echo "    user $app_user, an ES256 access token ($(echo "$device" | field '["expiresIn"]') s) and a refresh token"
auth=(-H "Authorization: Bearer $token")
json=(-H 'Content-Type: application/json')
echo "--> GET /v1/events: the user's live events (Server-Sent Events), kept open"
curl -sN "${auth[@]}" "$api/v1/events" >"$events" &
sse_pid=$!
pids+=($sse_pid)
sleep 0.5
echo "--> POST /v1/profiles (Idempotency-Key: retrying the same request makes no second job)"
key=$(python3 -c 'import uuid; print(uuid.uuid4())')
profile_body='{"profile":{"name":"Me","birthDate":"1990-10-07","birthTime":"15:00","timezone":"Europe/Kyiv","latitude":50.4501,"longitude":30.5234,"locationName":"Kyiv, Ukraine"}}'
chart_job=$(curl -fsS -X POST "$api/v1/profiles" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: $key" -d "$profile_body" | field '["jobId"]')
again=$(curl -fsS -X POST "$api/v1/profiles" "${auth[@]}" "${json[@]}" -H "Idempotency-Key: $key" -d "$profile_body" | field '["jobId"]')
[ "$again" = "$chart_job" ] || { echo "demo: a retried POST made a second job" >&2; exit 1; }
echo "    202, job $chart_job (the retry answered the same job)"
wait_event chart.calculated "$chart_job"
app_profile=$(curl -fsS "${auth[@]}" "$api/v1/jobs/$chart_job" | field '["result"]["profileId"]')
echo "--> GET /v1/profiles/$app_profile/chart"
curl -fsS "${auth[@]}" "$api/v1/profiles/$app_profile/chart" | python3 -c '
import json, sys
chart = json.load(sys.stdin)
print("    %d planets, %d houses, ascendant %.2f°, midheaven %.2f°" % (len(chart["planets"]), len(chart["houses"]),
      chart["ascendant"], chart["midheaven"]))'
echo "--> POST /v1/purchases: a StoreKit 2 transaction (dev-signed here; the app sends Transaction.jwsRepresentation)"
bought_tx=$(python3 -c 'import random; print(2000000000000000 + random.randrange(10**12))')
signed=$("$astroctl" billing dev-sign --pki "$pki" --user "$app_user" --transaction-id "$bought_tx" \
    --product com.astrosvitla.astroinsight.report.career)
purchase_job=$(curl -fsS -X POST "$api/v1/purchases" "${auth[@]}" "${json[@]}" -d "{\"signedTransaction\":\"$signed\"}" | field '["jobId"]')
wait_event billing.credits-issued "$purchase_job"
echo "    GET /v1/credits: $(curl -fsS "${auth[@]}" "$api/v1/credits" | field '["available"]') available"
echo "--> POST /v1/reports: a career report in English, paid with that credit"
report_job=$(curl -fsS -X POST "$api/v1/reports" "${auth[@]}" "${json[@]}" \
    -d "{\"profileId\":\"$app_profile\",\"area\":\"career\",\"language\":\"en\"}" | field '["jobId"]')
wait_event report.completed "$report_job"
report_id=$(curl -fsS "${auth[@]}" "$api/v1/reports?profileId=$app_profile" | field '["items"][0]["id"]')
echo "--> GET /v1/reports/$report_id (its first lines)"
curl -fsS "${auth[@]}" "$api/v1/reports/$report_id" >"$ASTRO_STACK_DIR/report.json"
python3 -c 'import json,sys; print("\n".join("    " + l for l in json.load(sys.stdin)["text"].splitlines()[:4]))' \
    <"$ASTRO_STACK_DIR/report.json"
echo "--> a second credit bought, then Apple refunds it: a dev-signed REFUND notification POSTed to the Apple endpoint"
refund_tx=$(python3 -c 'import random; print(2000000000000000 + random.randrange(10**12))')
signed=$("$astroctl" billing dev-sign --pki "$pki" --user "$app_user" --transaction-id "$refund_tx" \
    --product com.astrosvitla.astroinsight.report.career)
purchase_job=$(curl -fsS -X POST "$api/v1/purchases" "${auth[@]}" "${json[@]}" -d "{\"signedTransaction\":\"$signed\"}" | field '["jobId"]')
wait_event billing.credits-issued "$purchase_job"
echo "    GET /v1/credits: $(curl -fsS "${auth[@]}" "$api/v1/credits" | field '["available"]') available"
notification=$("$astroctl" billing dev-sign --pki "$pki" --user "$app_user" --transaction-id "$refund_tx" \
    --product com.astrosvitla.astroinsight.report.career --revoked --notification REFUND)
answer=$(curl -fsS -w ' %{http_code}' -X POST "$api/v1/appstore/notifications" "${json[@]}" -d "{\"signedPayload\":\"$notification\"}")
echo "    POST /v1/appstore/notifications (no token: Apple's signature is the proof): ${answer##* }"
wait_event billing.credits-revoked "$(echo "${answer% *}" | field '["jobId"]')"
left=$(curl -fsS "${auth[@]}" "$api/v1/credits" | field '["available"]')
echo "    GET /v1/credits: $left available (the refunded credit is revoked; the spent one paid for the report)"
[ "$left" = 0 ] || { echo "demo: the refunded credit is still available" >&2; exit 1; }
echo "--> GET /v1/ledger"
curl -fsS "${auth[@]}" "$api/v1/ledger" | python3 -c '
import json, sys
for e in reversed(json.load(sys.stdin)["items"]):
    print("    %-9s credit %s  transaction %s" % (e["entry"], e["creditId"][:8], e["transactionId"]))'
echo "--> GET /v1/profiles/$app_profile/chart.svg: the natal wheel, drawn by the gateway"
# The wheels are kept after the demo (the stack's folder is not), to be opened in a browser.
wheels=${TMPDIR:-/tmp}/astrosvitla-demo
mkdir -p "$wheels"
curl -fsS "${auth[@]}" -D "$ASTRO_STACK_DIR/wheel.headers" -o "$wheels/wheel.svg" "$api/v1/profiles/$app_profile/chart.svg"
etag=$(grep -i '^etag:' "$ASTRO_STACK_DIR/wheel.headers" | cut -d' ' -f2 | tr -d '\r')
echo "    $(wc -c <"$wheels/wheel.svg") bytes in $wheels/wheel.svg; again with If-None-Match: $(curl -sS -o /dev/null -w '%{http_code}' "${auth[@]}" -H "If-None-Match: $etag" "$api/v1/profiles/$app_profile/chart.svg")"
echo "--> POST /v1/profiles: a partner profile, then POST /v1/profiles/$app_profile/synastry"
partner_job=$(curl -fsS -X POST "$api/v1/profiles" "${auth[@]}" "${json[@]}" \
    -d '{"profile":{"name":"Partner","birthDate":"1988-03-21","birthTime":"08:30","timezone":"Europe/Kyiv","latitude":49.8397,"longitude":24.0297,"locationName":"Lviv, Ukraine"}}' | field '["jobId"]')
wait_event chart.calculated "$partner_job"
partner=$(curl -fsS "${auth[@]}" "$api/v1/jobs/$partner_job" | field '["result"]["profileId"]')
synastry_job=$(curl -fsS -X POST "$api/v1/profiles/$app_profile/synastry" "${auth[@]}" "${json[@]}" \
    -d "{\"partnerProfileId\":\"$partner\"}" | field '["jobId"]')
wait_event chart.computed "$synastry_job"
result=$(curl -fsS "${auth[@]}" "$api/v1/jobs/$synastry_job" | field '["result"]["resultId"]')
curl -fsS "${auth[@]}" "$api/v1/chart-results/$result" | python3 -c '
import json, sys
r = json.load(sys.stdin)["result"]
print("    %d inter-aspects, compatibility %s/100, composite ASC %.2f°" % (len(r["synastry"]["aspects"]),
      r["compatibility"]["score"], r["composite"]["ascendant"]))'
echo "--> POST /v1/profiles/$app_profile/wheels: the synastry bi-wheel, drawn by the chart-worker"
wheel_job=$(curl -fsS -X POST "$api/v1/profiles/$app_profile/wheels" "${auth[@]}" "${json[@]}" \
    -d "{\"wheel\":\"synastry\",\"partnerProfileId\":\"$partner\",\"theme\":\"dark\"}" | field '["jobId"]')
wait_event chart.computed "$wheel_job"
wheel=$(curl -fsS "${auth[@]}" "$api/v1/jobs/$wheel_job" | field '["result"]["resultId"]')
curl -fsS "${auth[@]}" -o "$wheels/bi-wheel.svg" "$api/v1/chart-results/$wheel"
echo "    $(wc -c <"$wheels/bi-wheel.svg") bytes in $wheels/bi-wheel.svg"
echo "--> POST /v1/reports with partnerProfileId: a relationships report for two, in Ukrainian"
pair_tx=$(python3 -c 'import random; print(2000000000000000 + random.randrange(10**12))')
signed=$("$astroctl" billing dev-sign --pki "$pki" --user "$app_user" --transaction-id "$pair_tx" \
    --product com.astrosvitla.astroinsight.report.relationships)
purchase_job=$(curl -fsS -X POST "$api/v1/purchases" "${auth[@]}" "${json[@]}" -d "{\"signedTransaction\":\"$signed\"}" | field '["jobId"]')
wait_event billing.credits-issued "$purchase_job"
pair_job=$(curl -fsS -X POST "$api/v1/reports" "${auth[@]}" "${json[@]}" \
    -d "{\"profileId\":\"$app_profile\",\"partnerProfileId\":\"$partner\",\"area\":\"relationships\",\"language\":\"uk\"}" | field '["jobId"]')
wait_event report.completed "$pair_job"
pair_report=$(curl -fsS "${auth[@]}" "$api/v1/reports?profileId=$app_profile" | python3 -c '
import json, sys
print(next(i["id"] for i in json.load(sys.stdin)["items"] if i.get("partnerProfileId")))')
curl -fsS "${auth[@]}" "$api/v1/reports/$pair_report" >"$ASTRO_STACK_DIR/pair-report.json"
python3 -c 'import json,sys; print("\n".join("    " + l for l in json.load(sys.stdin)["text"].splitlines()[:8]))' \
    <"$ASTRO_STACK_DIR/pair-report.json"
echo "--> what fails is logged by its code, never its values: a birth time in a clock-change gap, a duplicate"
echo "    profile name, an unknown zone, a story request of an age group there is not"
refused() { # path body expected-failed-event: a 202's job must end in that event; a 4xx is the gateway's refusal
    local answer status
    answer=$(curl -sS -w ' %{http_code}' -X POST "$api$1" "${auth[@]}" "${json[@]}" -d "$2")
    status=${answer##* }
    if [ "$status" = 202 ]; then
        wait_event "$3" "$(echo "${answer% *}" | field '["jobId"]')"
    elif [ "${status:0:1}" = 4 ]; then
        echo "    $status $(echo "${answer% *}" | field '["code"]')"
    else
        echo "demo: $1 answered $status: ${answer% *}" >&2; return 1
    fi
}
refused /v1/profiles '{"profile":{"name":"Gap Person","birthDate":"2021-03-28","birthTime":"03:30","timezone":"Europe/Kyiv","latitude":49.5,"longitude":24.2,"locationName":"Sokal, Ukraine"}}' chart.failed
refused /v1/profiles '{"profile":{"name":"Me","birthDate":"1991-05-17","birthTime":"09:15","timezone":"Europe/Kyiv","latitude":50.4501,"longitude":30.5234,"locationName":"Kyiv, Ukraine"}}' chart.failed
refused /v1/profiles '{"profile":{"name":"Zone Person","birthDate":"1992-08-19","birthTime":"10:00","timezone":"Europe/Atlantis","latitude":50.1,"longitude":30.1,"locationName":"Irpin, Ukraine"}}' chart.failed
refused /v1/stories '{"childName":"Ostap","ageGroup":7,"theme":"courage","mainCharacter":"Felix the Fox","language":"en","pageCount":3}' story.failed
kill "$sse_pid" 2>/dev/null || true
echo "--> the whole stream the app received:"
grep '^event:' "$events" | sed 's/^/    /'

echo
echo "==> sample-worker metrics"
curl -fsS "http://127.0.0.1:$port_sample_worker/metrics" | grep -E '^astro_(jobs_total|job_retries_total|dead_letters_total)'

echo
echo "==> stopping the workers (SIGTERM: graceful shutdown)"
cleanup
pids=()

echo
echo "==> the services' logs (info level) hold no birth data, place, child's name or report text"
# The values this demo sent, the failing requests' too, and every sentence of 30 characters or
# more of the report it read.
python3 - "$ASTRO_STACK_DIR/report.json" "$ASTRO_STACK_DIR/pair-report.json" >"$ASTRO_STACK_DIR/personal-values.txt" <<'PY'
import json, re, sys
# (not the birth time 15:00: every log timestamp between 15:00 and 15:59 has it)
for value in ["1990-10-07", "50.4501", "30.5234", "Kyiv, Ukraine", "1988-03-21", "49.8397", "24.0297", "Lviv, Ukraine",
              # what the failing requests sent
              "2021-03-28", "Sokal, Ukraine", "Gap Person", '"Me"', "1991-05-17", "Europe/Atlantis", "Zone Person",
              "1992-08-19", "Irpin, Ukraine", "Ostap"]:
    print(value)
for path in sys.argv[1:]:
    text = json.load(open(path))["text"]
    for sentence in re.split(r"[.!?\n]", text):
        if len(sentence.strip()) >= 30:
            print(sentence.strip())
PY
leaks=0
while IFS= read -r value; do
    if grep -rlF -- "$value" "$logs" >/dev/null; then
        echo "demo: a service logged a personal value at info level: $value" >&2
        grep -rF -- "$value" "$logs" | head -3 >&2
        leaks=1
    fi
done <"$ASTRO_STACK_DIR/personal-values.txt"
# The child's name, as a whole word (it is short).
if grep -rwl -- "Mia" "$logs" >/dev/null; then
    echo "demo: a service logged the child's name" >&2; grep -rw -- "Mia" "$logs" | head -3 >&2; leaks=1
fi
[ "$leaks" = 0 ] || exit 1
echo "    $(wc -l <"$ASTRO_STACK_DIR/personal-values.txt") values looked for in $(cat "$logs"/*.log | wc -l) log lines: none found"
echo "demo: done"
