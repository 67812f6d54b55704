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
# machine: exact where a name pattern would not be. A run made of parts marks each part MARK/PART
# (scripts/integration-tests.sh: one per suite); MARK finds them all, MARK/PART one part's, and
# MARK/ the parts only (not the process that runs them, which carries MARK itself).
set -euo pipefail
kill_them=0
if [ "${1:-}" = "--kill" ]; then kill_them=1; shift; fi
mark=${1:?usage: leftovers.sh [--kill] MARK}

pids=()
for dir in /proc/[0-9]*; do
    [ "${dir#/proc/}" = "$$" ] && continue
    # A process may end between the listing and the read: its environ is then unreadable.
    { while IFS= read -r -d '' entry; do
        if [ "$entry" = "ASTRO_TEST_RUN_ID=$mark" ] || [[ $entry == "ASTRO_TEST_RUN_ID=${mark%/}/"* ]]; then
            pids+=("${dir#/proc/}")
            break
        fi
    done <"$dir/environ"; } 2>/dev/null || true
done
[ ${#pids[@]} -eq 0 ] && exit 0
echo "leftovers: ${#pids[@]} process(es) of test run $mark still running:" >&2
ps -o pid,ppid,etime,args -p "$(IFS=,; echo "${pids[*]}")" >&2 || true
if [ "$kill_them" = 1 ]; then
    kill -KILL "${pids[@]}" 2>/dev/null || true
    echo "leftovers: killed them" >&2
fi
exit 1
