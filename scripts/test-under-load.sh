#!/usr/bin/env bash
# The test suites under load: while BURNERS CPU-burning processes compete for the cores, runs the
# unit suite UNIT_RUNS times and the integration suites, the chaos suite among them
# (scripts/integration-tests.sh, as scripts/test.sh runs them) INTEGRATION_RUNS times, then prints
# one line per run: what ran, tests passed, tests failed, processes left over, duration. Issue 30's
# proof that a loaded machine makes the suites slower, never red, and never leaves a process behind.
#
#   scripts/test-under-load.sh                 5 unit runs, 2 integration runs, 2 burners
#   scripts/test-under-load.sh --fail-on-purpose
#       one integration run of LLMReportTests with ASTRO_TEST_FAIL_ON_PURPOSE set, which makes
#       aPermanentlyFailingLLMRefundsTheCreditThroughTheWorkers wait for a refund that never comes
#       while its worker processes run: the run must end with exactly that test failed, within
#       60 s of the failure, and with no process left.
#
# Environment: UNIT_RUNS (5), INTEGRATION_RUNS (2), BURNERS (2), RUN_TIMEOUT (seconds one run may
# take before it counts as hung and is killed; 1800). Logs of every run go to OUT (a new
# temporary folder unless set). Exits 1 if any run failed, hung or left a process behind.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

UNIT_RUNS=${UNIT_RUNS:-5}
INTEGRATION_RUNS=${INTEGRATION_RUNS:-2}
BURNERS=${BURNERS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}
OUT=${OUT:-$(mktemp -d /tmp/astro-under-load.XXXXXX)}
mkdir -p "$OUT"
on_purpose=0
[ "${1:-}" = "--fail-on-purpose" ] && on_purpose=1
for setting in UNIT_RUNS INTEGRATION_RUNS BURNERS RUN_TIMEOUT; do
    [[ ${!setting} =~ ^[0-9]+$ ]] || { echo "under-load: $setting must be a whole number, not '${!setting}'" >&2; exit 2; }
done

burners=()
stop_burners() {
    [ ${#burners[@]} -gt 0 ] && kill "${burners[@]}" 2>/dev/null
    wait 2>/dev/null
}
trap stop_burners EXIT
trap 'exit 130' INT TERM

echo "==> building (tests included)"
swift build --build-tests >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "under-load: the build failed" >&2; exit 1; }

for _ in $(seq "$BURNERS"); do
    bash -c 'while :; do :; done' &
    burners+=($!)
done
echo "==> $BURNERS CPU burner(s) running (pids ${burners[*]}); logs in $OUT"

rows=()
bad=0
# run NAME CMD…: runs CMD with its output in $OUT/NAME.log, then counts tests and leftovers.
run() {
    local name=$1 start end status passed failed left hung=""
    shift
    start=$(date +%s)
    # The run's mark reaches every process the tests start (scripts/leftovers.sh).
    local mark="under-load-$$-$name"
    ASTRO_TEST_RUN_ID=$mark timeout --kill-after=30 "$RUN_TIMEOUT" "$@" >"$OUT/$name.log" 2>&1
    status=$?
    end=$(date +%s)
    [ "$status" -eq 124 ] || [ "$status" -eq 137 ] && hung=" (hung: killed after ${RUN_TIMEOUT}s)"
    passed=$(grep -E '✔ Test .* passed after' "$OUT/$name.log" | grep -vc '✔ Test run with')
    failed=$(grep -E '✘ Test .* failed after' "$OUT/$name.log" | grep -vc '✘ Test run with')
    left=0
    if ! bash scripts/leftovers.sh --kill "$mark" >"$OUT/$name.leftovers" 2>&1; then
        left=$(grep -cE '^ *[0-9]+ ' "$OUT/$name.leftovers")
    fi
    rows+=("$(printf '%-16s %7s %7s %10s %8ss  exit %s%s' "$name" "$passed" "$failed" "$left" "$((end - start))" "$status" "$hung")")
    echo "${rows[-1]}"
    LAST_LOG=$OUT/$name.log
    LAST_STATUS=$status
    LAST_LEFT=$left
    LAST_END=$end
}

header=$(printf '%-16s %7s %7s %10s %9s' run passed failed leftovers duration)
echo "$header"

if [ "$on_purpose" = 1 ]; then
    mark=$OUT/failed-at
    ASTRO_TEST_FAIL_ON_PURPOSE=$mark run fail-on-purpose \
        bash scripts/integration-tests.sh LLMReportTests
    failures=$(grep -E '✘ Test .* failed after' "$LAST_LOG" | grep -v '✘ Test run with' | sed -E 's/.*✘ Test ([A-Za-z0-9_]+).*/\1/' | sort -u)
    # The test writes the second it gave up (the run's own output reaches the log only at its end).
    failed_at=$(cat "$mark" 2>/dev/null || true)
    echo
    echo "failed tests: ${failures:-none}"
    if [ -n "$failed_at" ]; then
        echo "the run ended $((LAST_END - failed_at)) s after the failure was recorded"
    fi
    if [ "$failures" != "aPermanentlyFailingLLMRefundsTheCreditThroughTheWorkers" ] || [ "$LAST_LEFT" != 0 ] \
        || [ -z "$failed_at" ] || [ $((LAST_END - failed_at)) -ge 60 ]; then
        echo "under-load: expected exactly aPermanentlyFailingLLMRefundsTheCreditThroughTheWorkers to fail," \
            "the run to end within 60 s of it, and no process left" >&2
        exit 1
    fi
    exit 0
fi

for i in $(seq "$UNIT_RUNS"); do
    run "unit-$i" bash scripts/unit-tests.sh
    [ "$LAST_STATUS" -eq 0 ] && [ "$LAST_LEFT" -eq 0 ] || bad=1
done
for i in $(seq "$INTEGRATION_RUNS"); do
    run "integration-$i" bash scripts/integration-tests.sh
    [ "$LAST_STATUS" -eq 0 ] && [ "$LAST_LEFT" -eq 0 ] || bad=1
done

echo
echo "==> under load ($BURNERS burners on $(nproc) cores); logs in $OUT"
echo "$header"
printf '%s\n' "${rows[@]}"
exit $bad
