#!/usr/bin/env bash
# The integration suites, side by side, each in a process, a RabbitMQ virtual host and a
# PostgreSQL database of its own, on real servers this script starts (scripts/stack.sh) and
# stops.
#
#   scripts/integration-tests.sh [--jobs N] [--skip SUITE]… [SUITE…]
#
# With no SUITE, every suite of the IntegrationTests target. Needs the tests built
# (`swift build --build-tests`).
#
# Why this shape (issue 30): in one process on one vhost and database, a suite's leftover consumer
# or row met the next suite's jobs, and the suites had to run one at a time. Here a suite's worker
# processes, queues and rows cannot reach another's, so JOBS suites run at once. A vhost is a
# boundary a consumer cannot cross; the users and their permissions are the deployed ones
# (deploy/rabbitmq/definitions.json), given for every suite's vhost in one import.
#
# A few suites act on a whole server, not on their vhost or database: they restart RabbitMQ or
# PostgreSQL, raise the broker's memory alarm, close every connection of a broker user or change a
# PostgreSQL role's password (roles are cluster-wide). They run one after another on a second stack
# of their own, beside the others (NODE_WIDE_SUITES below; a new such suite belongs there).
#
# Every process a suite starts carries the mark ASTRO_TEST_RUN_ID=<run mark>/<suite> (ChildProcess
# in Tests/IntegrationTests passes it on). After each suite, passed or failed, a process still
# carrying its mark fails the suite, is listed and is killed (scripts/leftovers.sh). A suite that
# runs longer than SUITE_TIMEOUT seconds (900) is killed and fails. Each suite's output goes to a
# log file, printed whole when the suite ends, so suites running at once do not interleave.
#
# Environment: INTEGRATION_JOBS (how many suites at once when --jobs is not given; 3: the suites
# mostly wait on servers, and more than three on two cores made runs slower, not faster),
# ASTRO_TEST_RUN_ID (the run mark; one is made when unset), INTEGRATION_OUT (where the logs go; a
# new temporary folder when unset). Exits 1 if any suite failed, timed out or left a process running.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
script_start=$(date +%s)

NODE_WIDE_SUITES=(AMQPIntegrationTests PostgresIntegrationTests GatewayAppleTests GatewayProcessTests
    GatewayEventsTests WorkerRoleTests ChaosTests)
# The longest suites start first, so that none of them is left to run alone at the end.
LONG_SUITES=(ChaosTests LLMReportTests GatewayEdgeTests UserExportTests StoryWorkerProcessTests PaidWorkTests
    BillingWorkerProcessTests ReportJourneyTests GatewayStoriesTests)
SUITE_TIMEOUT=${SUITE_TIMEOUT:-900}

die() { printf 'integration-tests: %s\n' "$*" >&2; exit 2; }

jobs_wanted=${INTEGRATION_JOBS:-3}
skipped=()
wanted=()
while [ $# -gt 0 ]; do
    case $1 in
        --jobs) jobs_wanted=${2:-}; shift 2 || die "--jobs needs a number" ;;
        --skip) skipped+=("${2:?--skip needs a suite name}"); shift 2 ;;
        -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) wanted+=("$1"); shift ;;
    esac
done
[[ $jobs_wanted =~ ^[1-9][0-9]?$ ]] || die "--jobs (or INTEGRATION_JOBS) must be a number from 1 to 99, not '$jobs_wanted'"
[[ $SUITE_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "SUITE_TIMEOUT must be a positive number of seconds, not '$SUITE_TIMEOUT'"

# Found without asking SwiftPM, which would wait for the build lock another build (schemathesis'
# in scripts/test.sh) may hold.
binary=.build/debug/astrosvitla-backendPackageTests.xctest
[ -x "$binary" ] || binary="$(swift build --show-bin-path 2>/dev/null)/astrosvitla-backendPackageTests.xctest"
binary=$(realpath "$binary" 2>/dev/null || echo "$binary")
[ -x "$binary" ] || die "no test binary at $binary: build first (swift build --build-tests)"

# The suites: every IntegrationTests suite the binary lists, less the skipped ones, or the named ones.
mapfile -t all_suites < <("$binary" --testing-library swift-testing --list-tests 2>/dev/null \
    | sed -n 's|^IntegrationTests\.\([A-Za-z0-9_]*\)/.*|\1|p' | sort -u)
[ ${#all_suites[@]} -gt 0 ] || die "the test binary lists no IntegrationTests suite"
is_in() { local x=$1; shift; local y; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }
if [ ${#wanted[@]} -gt 0 ]; then
    for s in "${wanted[@]}"; do is_in "$s" "${all_suites[@]}" || die "no integration suite named $s"; done
    selected=("${wanted[@]}")
else
    selected=("${all_suites[@]}")
fi
isolated=()
node_wide=()
for s in "${LONG_SUITES[@]}" "${selected[@]}"; do
    is_in "$s" "${selected[@]}" || continue
    [ ${#skipped[@]} -gt 0 ] && is_in "$s" "${skipped[@]}" && continue
    if is_in "$s" "${NODE_WIDE_SUITES[@]}"; then
        [ ${#node_wide[@]} -gt 0 ] && is_in "$s" "${node_wide[@]}" && continue
        node_wide+=("$s")
    else
        [ ${#isolated[@]} -gt 0 ] && is_in "$s" "${isolated[@]}" && continue
        isolated+=("$s")
    fi
done
[ $((${#isolated[@]} + ${#node_wide[@]})) -gt 0 ] || die "every selected suite is skipped"

mark=${ASTRO_TEST_RUN_ID:-integration-$$-$(date +%s%N)}
OUT=${INTEGRATION_OUT:-$(mktemp -d /tmp/astro-integration.XXXXXX)}
mkdir -p "$OUT/logs" "$OUT/results"
run_start=$(date +%s)

# The stacks, stopped (with everything the suites left, by their marks) however the script ends.
lanes=()
cleanup() {
    local status=$? dir
    [ ${#lanes[@]} -gt 0 ] && kill -TERM "${lanes[@]}" 2>/dev/null
    # The suites' processes only: this script and its callers may carry the run mark itself.
    bash scripts/leftovers.sh --kill "$mark/" >/dev/null 2>&1
    # Both stacks stop at once: a broker with a chaos run's queues behind it can take seconds.
    local stopping=$(date +%s)
    for dir in "$OUT"/*.dir; do
        [ -s "$dir" ] && ASTRO_STACK_DIR=$(cat "$dir") bash scripts/stack.sh stop >/dev/null 2>&1 &
    done
    wait
    echo "==> stacks stopped in $(($(date +%s) - stopping))s"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_stack NAME SUITE…: a stack of its own, with a vhost for each SUITE; writes $OUT/NAME.env
# (its folder is recorded in $OUT/NAME.dir as soon as it exists, for the cleanup).
start_stack() {
    local name=$1 env_file=$OUT/$1.env
    shift
    bash scripts/stack.sh start >"$env_file" 2>"$OUT/$name.stack.log" || return 1
    sed -n 's/^export ASTRO_STACK_DIR=//p' "$env_file" >"$OUT/$name.dir"
    # One import for every suite's vhost: the deployed permissions and policies of `/`, copied.
    bash scripts/stack.sh definitions | python3 -c '
import json, sys
definitions = json.load(sys.stdin)
out = {"vhosts": [], "permissions": [], "topic_permissions": [], "policies": []}
for suite in sys.argv[1:]:
    vhost = "it-" + suite
    out["vhosts"].append({"name": vhost})
    for key in ("permissions", "topic_permissions", "policies"):
        out[key] += [dict(entry, vhost=vhost) for entry in definitions.get(key, []) if entry.get("vhost") == "/"]
json.dump(out, sys.stdout)
' "$@" >"$OUT/$name.vhosts.json" || return 1
    (
        # shellcheck disable=SC1090
        source "$env_file"
        bash scripts/stack.sh rabbit-ctl import_definitions "$OUT/$name.vhosts.json"
    ) >>"$OUT/$name.stack.log" 2>&1
}

# run_suite STACK SUITE: the suite in a process of its own, on its vhost and a new database.
run_suite() {
    local stack=$1 suite=$2 log=$OUT/logs/$2.log start status database left=""
    start=$(date +%s)
    (
        # shellcheck disable=SC1090
        source "$OUT/$stack.env"
        database="it_$(printf '%s' "$suite" | tr 'A-Z' 'a-z')"
        psql -q "$DATABASE_URL" -c "CREATE DATABASE $database" >"$log" 2>&1 || exit 3
        local variable
        for variable in $(compgen -e | grep -E 'AMQPS?_URL$'); do
            export "$variable=${!variable%/%2F}/it-$suite"
        done
        export DATABASE_URL="${DATABASE_URL%/*}/$database"
        export ASTRO_TEST_RUN_ID="$mark/$suite"
        exec timeout --kill-after=30 "$SUITE_TIMEOUT" \
            "$binary" --testing-library swift-testing --no-parallel --filter "^IntegrationTests\\.$suite/"
    ) >>"$log" 2>&1
    status=$?
    if ! bash scripts/leftovers.sh --kill "$mark/$suite" >>"$log" 2>&1; then
        left=" and left processes running (listed above; killed)"
        [ "$status" -eq 0 ] && status=1
    fi
    local seconds=$(($(date +%s) - start)) verdict=passed
    case $status in
        0) ;;
        3) verdict="could not get a database" ;;
        124 | 137) verdict="timed out after ${SUITE_TIMEOUT}s" ;;
        *) verdict="failed (exit $status)" ;;
    esac
    printf '%s %s %s\n' "$status" "$seconds" "$stack" >"$OUT/results/$suite"
    {
        flock 9
        cat "$log"
        printf '==> %s %s%s in %ss (%s stack; log %s)\n' "$suite" "$verdict" "$left" "$seconds" "$stack" "$log"
    } 9>"$OUT/print.lock"
}

# heal_stack STACK: a node-wide suite stops and restarts servers; if one failed to come back, the
# next suite would fail for it too. Bring the servers back (and say so) before the next suite.
heal_stack() {
    (
        # shellcheck disable=SC1090
        source "$OUT/$1.env"
        local rport
        rport=$(cat "$ASTRO_STACK_DIR/rabbit/port")
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$rport") 2>/dev/null; then
            echo "==> the $1 stack's RabbitMQ is down after the last suite: restarting it"
            bash scripts/stack.sh rabbit-restart >>"$OUT/$1.stack.log" 2>&1 ||
                echo "==> the $1 stack's RabbitMQ did not restart (log $OUT/$1.stack.log)"
        fi
        if ! PGCONNECT_TIMEOUT=10 timeout 20 psql -q "$DATABASE_URL" -c 'SELECT 1' >/dev/null 2>&1; then
            echo "==> the $1 stack's PostgreSQL is down after the last suite: restarting it"
            bash scripts/stack.sh pg-restart >>"$OUT/$1.stack.log" 2>&1 ||
                echo "==> the $1 stack's PostgreSQL did not restart (log $OUT/$1.stack.log)"
        fi
    )
}

echo "==> integration suites: ${#isolated[@]} side by side ($jobs_wanted at once), ${#node_wide[@]} acting on a whole" \
    "server one at a time on a stack of their own; run mark $mark; logs in $OUT/logs"
# Both stacks start at once (each takes ~6 s, mostly RabbitMQ's boot).
starting=()
if [ ${#isolated[@]} -gt 0 ]; then start_stack shared "${isolated[@]}" & starting+=("$!:shared"); fi
if [ ${#node_wide[@]} -gt 0 ]; then start_stack own "${node_wide[@]}" & starting+=("$!:own"); fi
for entry in "${starting[@]}"; do
    wait "${entry%%:*}" || { cat "$OUT/${entry#*:}.stack.log" >&2; die "the ${entry#*:} stack did not start"; }
done
echo "==> stacks ready in $(($(date +%s) - run_start))s"

# The node-wide suites in one lane of their own; the others fill the remaining lanes.
pool=$jobs_wanted
if [ ${#node_wide[@]} -gt 0 ]; then
    (for s in "${node_wide[@]}"; do heal_stack own; run_suite own "$s"; done) &
    lanes+=($!)
    [ "$pool" -gt 1 ] && [ ${#isolated[@]} -gt 0 ] && pool=$((pool - 1))
    # With one lane, the node-wide suites end before the others start.
    [ "$jobs_wanted" -eq 1 ] && wait "${lanes[@]}"
fi
running=()
for s in "${isolated[@]}"; do
    while :; do
        alive=()
        for pid in "${running[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
        running=("${alive[@]}")
        [ ${#running[@]} -lt "$pool" ] && break
        wait -n "${running[@]}" 2>/dev/null || true
    done
    run_suite shared "$s" &
    running+=($!)
    lanes+=($!)
done
wait

# The verdict: one line per suite, slowest first, then the totals.
failed=()
total_tests=0
rows=()
for s in "${isolated[@]}" "${node_wide[@]}"; do
    if ! read -r status seconds stack <"$OUT/results/$s" 2>/dev/null; then
        failed+=("$s")
        rows+=("$(printf '%6s  %-6s  %-40s %s' - - "$s" "DID NOT FINISH")")
        continue
    fi
    [ "$status" -eq 0 ] || failed+=("$s")
    rows+=("$(printf '%6s  %-6s  %-40s %s' "$seconds" "$stack" "$s" "$([ "$status" -eq 0 ] && echo passed || echo FAILED)")")
    total_tests=$((total_tests + $(grep -E '✔ Test .* passed after' "$OUT/logs/$s.log" | grep -vc '✔ Test run with')))
done
echo
echo "==> integration suites by duration (seconds, stack, suite, result)"
printf '%s\n' "${rows[@]}" | sort -rn
echo "==> $total_tests tests passed in ${#rows[@]} suites in $(($(date +%s) - run_start))s" \
    "($(($(date +%s) - script_start))s since the script started)"
if [ ${#failed[@]} -gt 0 ]; then
    echo "==> FAILED: ${failed[*]} (their logs are above, and in $OUT/logs)" >&2
    exit 1
fi
