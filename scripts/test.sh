#!/usr/bin/env bash
# Every check CI runs, from a fresh clone: installs what is missing, lints, builds with warnings
# as errors, then, side by side: every fuzz target fuzzed briefly, the unit tests, the integration
# tests (the chaos suite among them) against real RabbitMQ and PostgreSQL servers started for the
# run (scripts/stack.sh) and stopped afterwards, and schemathesis against the live gateway.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Each step's duration, printed as a table when the script ends (passed or not), so a slow CI run
# says where its time went.
run_start=$(date +%s)
# The machine's busy CPU time (user, nice, system, irq, softirq, steal; all cores), in clock ticks:
# per step beside the wall time, it shows whether a step waited or computed (a step can use up to
# one CPU-second per core per second; work running in the background counts where it ran).
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
ticks_per_second=$(getconf CLK_TCK)
run_busy=$(busy_ticks)
step_names=()
step_starts=()
step_busy=()
step() {
    step_names+=("$*")
    step_starts+=("$(date +%s)")
    step_busy+=("$(busy_ticks)")
    printf '\n==> %s\n' "$*"
}
timings() {
    local status=$? now busy i end end_busy
    now=$(date +%s)
    busy=$(busy_ticks)
    printf '\n==> time per step (exit %s): wall seconds, and CPU-seconds the machine was busy (%s cores)\n' \
        "$status" "$(nproc)"
    for i in "${!step_names[@]}"; do
        end=${step_starts[$((i + 1))]:-$now}
        end_busy=${step_busy[$((i + 1))]:-$busy}
        printf '%6ss %7s CPU-s  %s\n' "$((end - step_starts[i]))" \
            "$(((end_busy - step_busy[i]) / ticks_per_second))" "${step_names[$i]}"
    done
    printf '%6ss %7s CPU-s  total\n' "$((now - run_start))" "$(((busy - run_busy) / ticks_per_second))"
}
# The fuzzing and schemathesis run in the background beside the tests (see below); each is ended
# with the script if the script ends first.
fuzz_pid=""
contract_pid=""
finish() {
    local status=$? pid
    for pid in "$fuzz_pid" "$contract_pid"; do
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM -- "-$pid" 2>/dev/null || true
        fi
    done
    (exit "$status")
    timings
}
trap finish EXIT

# Every process a test starts carries the mark of the run in its environment (ChildProcess in
# Tests/IntegrationTests; scripts/leftovers.sh): exact, where other runs of the same binaries on
# this machine carry another mark or none.
test_run_mark="test-sh-$$-$(date +%s%N)"
step "installing system packages (if missing)"
bash scripts/stack.sh install
command -v swift >/dev/null || { echo "test: the Swift 6 toolchain (swift) is not on PATH" >&2; exit 1; }
swift --version 2>&1 | head -1

step "swift format lint"
swift format lint --strict --recursive Package.swift Sources Tests

step "build (debug, tests included, warnings are errors)"
# Our targets must compile without a warning; packages we depend on are not ours to fix.
build_log=$(mktemp)
if ! swift build --build-tests 2>&1 | tee "$build_log"; then exit 1; fi
if grep -E "^$(pwd)/(Sources|Tests)/.*: warning:" "$build_log"; then
    echo "test: the build has warnings in our code (above); fix them" >&2
    exit 1
fi
rm -f "$build_log"

step "fuzzing starts in the background (libFuzzer with AddressSanitizer, debug build, 30 s per target; Fuzz/README.md)"
# Its sanitizer build is CPU-bound; the tests beside it mostly wait on servers and must pass on a
# loaded machine anyway (scripts/test-under-load.sh). The debug build takes about a third of the
# release build's time, and 30 s per target is a smoke run: for long runs use the release default.
# Its own session, so that ending it ends its compiler and fuzzers.
fuzz_log=$(mktemp)
FUZZ_CONFIGURATION=debug setsid bash scripts/fuzz.sh 30 >"$fuzz_log" 2>&1 &
fuzz_pid=$!
echo "fuzzing in the background (pid $fuzz_pid), its output follows when it ends"

step "unit tests (no servers)"
bash scripts/unit-tests.sh

step "alert rules, their unit tests and the dashboards (promtool; deploy/observability)"
bash scripts/observability-check.sh

step "schemathesis starts in the background (the live gateway against openapi.yaml, 60 s per generated phase)"
# On a stack of its own, beside the integration suites; its output follows when it ends.
contract_log=$(mktemp)
setsid bash scripts/contract-check.sh 60 >"$contract_log" 2>&1 &
contract_pid=$!
echo "schemathesis in the background (pid $contract_pid)"

step "integration tests (real RabbitMQ and PostgreSQL; scripts/integration-tests.sh)"
# Each suite in a process, a vhost and a database of its own, three at once; the suites that
# restart or alarm a server (the chaos suite among them: kill -9 workers, restart RabbitMQ and
# PostgreSQL with thousands of jobs in flight, then exactly one outcome per job) one at a time on a
# second stack beside them. A process a suite leaves running fails it.
integration_status=0
ASTRO_TEST_RUN_ID=$test_run_mark bash scripts/integration-tests.sh || integration_status=$?
if ! bash scripts/leftovers.sh --kill "$test_run_mark"; then
    echo "test: the processes above were started by the integration tests and outlived them" >&2
    integration_status=1
fi
[ "$integration_status" -eq 0 ] || exit "$integration_status"

step "schemathesis: waiting for it to end"
contract_status=0
wait "$contract_pid" || contract_status=$?
contract_pid=""
cat "$contract_log"
rm -f "$contract_log"
[ "$contract_status" -eq 0 ] || { echo "test: schemathesis failed (exit $contract_status, above)" >&2; exit 1; }

step "fuzzing: waiting for it to end"
# A crash, hang or out-of-memory on any input fails CI; the failing input is printed for replay.
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
fuzz_pid=""
# Its build's progress lines are long and say nothing a failure needs, unless the build failed.
if grep -q '^==> build took' "$fuzz_log"; then
    sed -n '/^==> build took/,$p' "$fuzz_log"
else
    tail -60 "$fuzz_log"
fi
rm -f "$fuzz_log"
[ "$fuzz_status" -eq 0 ] || { echo "test: fuzzing failed (exit $fuzz_status, above)" >&2; exit 1; }
