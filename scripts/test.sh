#!/usr/bin/env bash
# Every check CI runs, from a fresh clone: installs what is missing, lints, builds with warnings
# as errors, runs the unit tests, fuzzes every fuzz target briefly, then the integration tests
# against a real RabbitMQ and PostgreSQL started for the run (scripts/stack.sh) and stopped
# afterwards, then the chaos suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Each step's duration, printed as a table when the script ends (passed or not), so a slow CI run
# says where its time went.
run_start=$(date +%s)
step_names=()
step_starts=()
step() {
    step_names+=("$*")
    step_starts+=("$(date +%s)")
    printf '\n==> %s\n' "$*"
}
timings() {
    local status=$? now i end
    now=$(date +%s)
    printf '\n==> time per step (exit %s)\n' "$status"
    for i in "${!step_names[@]}"; do
        end=${step_starts[$((i + 1))]:-$now}
        printf '%6ss  %s\n' "$((end - step_starts[i]))" "${step_names[$i]}"
    done
    printf '%6ss  total\n' "$((now - run_start))"
}
trap timings EXIT

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
bash scripts/stack.sh run -- swift test --skip-build --no-parallel --filter IntegrationTests --skip ChaosTests

step "the live gateway against openapi.yaml (schemathesis, property-based; 60 s per generated phase)"
bash scripts/contract-check.sh 60

step "chaos suite (kill -9 workers, restart RabbitMQ and PostgreSQL with thousands of jobs in flight)"
# On a stack of its own, after the fast tests: it prints what it found (outcomes, duplicates, losses,
# dead letters, ledger balance) and fails if any job has other than exactly one outcome.
bash scripts/stack.sh run -- swift test --skip-build --no-parallel --filter ChaosTests
