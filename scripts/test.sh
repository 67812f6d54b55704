#!/usr/bin/env bash
# Every check CI runs, from a fresh clone: installs what is missing, lints, builds with warnings
# as errors, runs the unit tests, fuzzes every fuzz target briefly, then the integration tests
# against a real RabbitMQ and PostgreSQL started for the run (scripts/stack.sh) and stopped
# afterwards, then the chaos suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

# Every process a test starts carries the mark of the run in its environment (ChildProcess in
# Tests/IntegrationTests): exact, where other runs of the same binaries on this machine carry
# another mark or none.
test_run_mark="test-sh-$$-$(date +%s%N)"
# Runs `swift test ARG…` against a stack of its own (scripts/stack.sh), then, passed or failed,
# fails loudly if a process the tests started is still running: lists it and kills it. The exit
# status is the tests' when they failed.
run_tests() {
    local status=0 dir pids=()
    bash scripts/stack.sh run -- env "ASTRO_TEST_RUN_ID=$test_run_mark" swift test "$@" || status=$?
    for dir in /proc/[0-9]*; do
        if { tr '\0' '\n' <"$dir/environ"; } 2>/dev/null | grep -qxF "ASTRO_TEST_RUN_ID=$test_run_mark"; then
            pids+=("${dir#/proc/}")
        fi
    done
    if [ ${#pids[@]} -gt 0 ]; then
        echo "test: ${#pids[@]} process(es) the tests started are still running (killed now):" >&2
        ps -o pid,ppid,etime,args -p "$(IFS=,; echo "${pids[*]}")" >&2 || true
        kill -KILL "${pids[@]}" 2>/dev/null || true
        if [ "$status" -eq 0 ]; then status=1; fi
    fi
    return "$status"
}

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

step "unit tests (no servers)"
swift test --skip-build --skip IntegrationTests

step "alert rules, their unit tests and the dashboards (promtool; deploy/observability)"
bash scripts/observability-check.sh

step "fuzzing (libFuzzer with AddressSanitizer, 30 s per target; Fuzz/README.md)"
# A crash, hang or out-of-memory on any input fails CI; the failing input is printed for replay.
bash scripts/fuzz.sh 30

step "integration tests (real RabbitMQ and PostgreSQL)"
# Serially: some tests restart RabbitMQ or PostgreSQL, which would disturb tests running beside them.
run_tests --skip-build --no-parallel --filter IntegrationTests --skip ChaosTests

step "the live gateway against openapi.yaml (schemathesis, property-based; 60 s per generated phase)"
bash scripts/contract-check.sh 60

step "chaos suite (kill -9 workers, restart RabbitMQ and PostgreSQL with thousands of jobs in flight)"
# On a stack of its own, after the fast tests: it prints what it found (outcomes, duplicates, losses,
# dead letters, ledger balance) and fails if any job has other than exactly one outcome.
run_tests --skip-build --no-parallel --filter ChaosTests
