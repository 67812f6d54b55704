#!/usr/bin/env bash
# Lists the processes that carry a test run's mark and are still running, one line each (pid,
# parent, elapsed time, command line); with --kill, kills them too. Exits 1 if there is one.
#
#   scripts/leftovers.sh [--kill] MARK
#
# Every process a test starts carries its run's mark in its environment as ASTRO_TEST_RUN_ID=MARK
# (ChildProcess in Tests/IntegrationTests passes it on; scripts/test.sh and
# scripts/test-under-load.sh give `swift test` a mark of its own per run), so the test binary and
# everything it started are found, and nothing of another run of the same binaries on this
# machine: exact where a name pattern would not be.
set -euo pipefail
kill_them=0
if [ "${1:-}" = "--kill" ]; then kill_them=1; shift; fi
mark=${1:?usage: leftovers.sh [--kill] MARK}

pids=()
for dir in /proc/[0-9]*; do
    [ "${dir#/proc/}" = "$$" ] && continue
    if { tr '\0' '\n' <"$dir/environ"; } 2>/dev/null | grep -qxF "ASTRO_TEST_RUN_ID=$mark"; then
        pids+=("${dir#/proc/}")
    fi
done
[ ${#pids[@]} -eq 0 ] && exit 0
echo "leftovers: ${#pids[@]} process(es) of test run $mark still running:" >&2
ps -o pid,ppid,etime,args -p "$(IFS=,; echo "${pids[*]}")" >&2 || true
if [ "$kill_them" = 1 ]; then
    kill -KILL "${pids[@]}" 2>/dev/null || true
    echo "leftovers: killed them" >&2
fi
exit 1
