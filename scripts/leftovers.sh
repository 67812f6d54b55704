#!/usr/bin/env bash
# Lists the processes still running from this checkout's builds: any process whose executable is
# under one of its .build folders (workers, the gateway, astroctl, fuzzers, test bundles), one line
# each (pid, elapsed time, command line). Exits 1 if there is one, 0 if there is none.
#
#   scripts/leftovers.sh            list them
#   scripts/leftovers.sh --kill     list them, then SIGKILL them (still exits 1 if there were any)
#
# Exact by design: other checkouts on this machine run the same binaries from their own folders,
# and their processes are not ours to list or end. A process started through setpriv has exec'd
# the binary, so its executable is the binary.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kill_them=0
[ "${1:-}" = "--kill" ] && kill_them=1

found=()
for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    [ "$pid" = "$$" ] && continue
    exe=$(readlink "$proc/exe" 2>/dev/null) || continue
    case $exe in
        "$repo"/.build/* | "$repo"/.build-*/*) found+=("$pid") ;;
    esac
done

[ ${#found[@]} -eq 0 ] && exit 0
echo "leftovers: ${#found[@]} process(es) from $repo still running:" >&2
for pid in "${found[@]}"; do
    line=$(ps -o pid=,etime=,args= -p "$pid" 2>/dev/null | cut -c1-300) || continue
    echo "  $line" >&2
done
if [ "$kill_them" = 1 ]; then
    kill -KILL "${found[@]}" 2>/dev/null || true
    echo "leftovers: killed them" >&2
fi
exit 1
