#!/usr/bin/env bash
# The unit tests (no servers), in two runs of `swift test --skip-build`: first the test targets
# whose tests measure time (fakes of Apple's and OpenAI's APIs, timeouts, retries with backoff,
# servers on loopback), then every other unit test target.
#
# Why two: swift-testing runs a process's tests side by side on Swift's cooperative threads, one
# per core. In one run, the compute-bound tests (charts, transits, fuzz corpora, the knowledge
# bases) held both threads for ~30 s at a time on a loaded 2-core machine, and tests waiting on a
# 0.5 s timeout or a 10 s retry meanwhile saw their deadlines pass before their answer could be
# read (scripts/test-under-load.sh: 3 of 5 runs failed, up to 14 tests, every failure ~31-42 s
# into a wait). Apart, each run keeps its own tests side by side.
#
#   scripts/unit-tests.sh [ARG…]     extra arguments go to both runs of swift test
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Test targets with tests that measure time; a new such target belongs here.
TIMED_TARGETS=(AMQPTests AppStoreServerAPITests DeployTests GatewayTests LLMClientTests PostgresTests
    StoriesTests StoryIllustrationTests TestProcessesTests TracingTests WorkerRuntimeTests)
timed="^($(IFS='|'; echo "${TIMED_TARGETS[*]}"))\\."

status=0
echo "==> unit tests that measure time: ${TIMED_TARGETS[*]}"
swift test --skip-build --filter "$timed" "$@" || status=$?
echo "==> the other unit tests"
swift test --skip-build --skip IntegrationTests --skip "$timed" "$@" || status=$?
exit "$status"
