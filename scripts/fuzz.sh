#!/usr/bin/env bash
# Coverage-guided fuzzing (Fuzz/README.md): builds astro-fuzz with libFuzzer and AddressSanitizer in
# .build-fuzz (the ordinary .build is left alone), then fuzzes each target for SECONDS on a copy of its
# seed corpus (Fuzz/corpus/<target>), as many targets at once as there are cores.
#
#   scripts/fuzz.sh [SECONDS] [TARGET…]     SECONDS defaults to 30; targets default to all of them:
#                                           json amqp-table jws url http cbor
#
# Environment:
#   FUZZ_JOBS        how many targets fuzz at once (default: the number of cores)
#   FUZZ_OUT         where each target's working corpus, log and crash artifacts go
#                    (default .build-fuzz/runs/<UTC time>)
#   FUZZ_SANITIZERS  the -sanitize= list (default fuzzer,address; fuzzer alone builds and runs faster)
#   FUZZ_CONFIGURATION  release (default: the most executions per second, for long runs) or debug
#                    (builds in about a third of the time; scripts/test.sh uses it for its 30 s runs)
#   FUZZ_KEEP_GOING  1: keep fuzzing after a crash (libFuzzer -fork=1 -ignore_crashes=1 …), to look
#                    past a known bug for others; every failing input is kept
#
# Prints per target the executions, executions per second and corpus size; exits 1 if any target
# crashed, hung (-timeout) or ran out of memory (-rss_limit_mb), naming the input that did it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ALL_TARGETS=(json amqp-table jws url http cbor)
seconds=${1:-30}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: SECONDS must be a whole number above 0, got '$seconds'" >&2; exit 2; }
for target in "${targets[@]}"; do
    [ -d "Fuzz/corpus/$target" ] || { echo "fuzz: unknown target '$target' (${ALL_TARGETS[*]})" >&2; exit 2; }
done

# The longest input libFuzzer makes per target: room for the longest seed (fixture tokens are ~5 KB).
max_len() {
    case $1 in
        jws) echo 16384 ;;
        url) echo 1024 ;;
        http) echo 2048 ;;
        *) echo 4096 ;;
    esac
}

bash scripts/stack.sh install
command -v swift >/dev/null || { echo "fuzz: the Swift 6 toolchain (swift) is not on PATH" >&2; exit 1; }

# Coverage instrumentation; -enable-testing because two targets reach internal decoders through
# @testable import; ASTRO_FUZZING swaps the replay main of astro-fuzz for libFuzzer's driver. Each
# configuration has a scratch folder of its own, so switching does not rebuild the other.
sanitizers=${FUZZ_SANITIZERS:-fuzzer,address}
configuration=${FUZZ_CONFIGURATION:-release}
case $configuration in
    release | debug) ;;
    *) echo "fuzz: FUZZ_CONFIGURATION must be release or debug, got '$configuration'" >&2; exit 2 ;;
esac
scratch=.build-fuzz
[ "$configuration" = debug ] && scratch=.build-fuzz-debug
build_flags=(--scratch-path "$scratch" -c "$configuration" --product astro-fuzz
    -Xswiftc "-sanitize=$sanitizers" -Xswiftc -DASTRO_FUZZING -Xswiftc -enable-testing)
echo "==> building astro-fuzz ($configuration, -sanitize=$sanitizers) in $scratch"
build_start=$(date +%s)
swift build "${build_flags[@]}"
build_seconds=$(($(date +%s) - build_start))
echo "==> build took ${build_seconds}s"
bin="$(swift build "${build_flags[@]}" --show-bin-path)/astro-fuzz"

out=${FUZZ_OUT:-.build-fuzz/runs/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "==> fuzzing ${targets[*]} for ${seconds}s each; corpora, logs and crash artifacts in $out"

keep_going=()
if [ "${FUZZ_KEEP_GOING:-0}" = 1 ]; then
    keep_going=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi

# One target: fuzzes it, then writes its summary line to $work/summary and, if it failed, what a
# person needs to replay it to $work/report.
fuzz_one() {
    local target=$1 work=$out/$1 start status=0 elapsed execs rate progress corpus line artifacts artifact
    rm -rf "$work"
    mkdir -p "$work/corpus" "$work/crashes"
    cp Fuzz/corpus/"$target"/* "$work/corpus/"
    start=$(date +%s)
    # -rss_limit_mb also caps single allocations (-malloc_limit_mb defaults to it); -timeout is per input.
    # SWIFT_BACKTRACE: Swift's own crash handler would run before libFuzzer's (and trips AddressSanitizer).
    ASTRO_FUZZ_TARGET=$target SWIFT_BACKTRACE=enable=no "$bin" "$work/corpus" \
        -max_total_time="$seconds" -max_len="$(max_len "$target")" -rss_limit_mb=2048 -timeout=10 \
        -artifact_prefix="$work/crashes/" -print_final_stats=1 "${keep_going[@]}" >"$work/log" 2>&1 || status=$?
    elapsed=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
    if [ -z "$execs" ]; then
        # -fork prints no final stats: take the last progress line (#EXECS: … exec/s: RATE …).
        progress=$(grep -E '^#[0-9]+' "$work/log" | tail -1 || true)
        execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$progress")
        [ "$elapsed" -gt 0 ] && [ -n "$execs" ] && rate=$((execs / elapsed))
    fi
    corpus=$(find "$work/corpus" -type f | wc -l)
    line=$(printf '%-11s %9s execs %7s exec/s  corpus %5s files  %4ss' \
        "$target" "${execs:-?}" "${rate:-?}" "$corpus" "$elapsed")
    artifacts=$(find "$work/crashes" -type f | sort)
    if [ "$status" -ne 0 ] || [ -n "$artifacts" ]; then
        line+="  FAILED (exit $status)"
        {
            grep -E '^(==[0-9]+==ERROR|SUMMARY|.*Fatal error|ALARM|.*out-of-memory|.*deadly signal)' "$work/log" \
                | cut -c1-400 | sort -u | head -5 || true
            if [ -n "$artifacts" ]; then
                echo "    $(wc -l <<<"$artifacts") failing input(s) in $work/crashes; the first:"
            else
                echo "    no failing input was saved (see the log)"
            fi
            for artifact in $(head -3 <<<"$artifacts"); do
                echo "    input: $artifact"
                echo "    replay: ASTRO_FUZZ_TARGET=$target SWIFT_BACKTRACE=enable=no $bin $artifact"
            done
            echo "    log: $work/log"
        } >"$work/report"
    fi
    echo "$line" >"$work/summary"
    echo "$line"
}

# Targets run side by side, FUZZ_JOBS at a time (default: one per core): each still gets its own
# SECONDS of fuzzing on a core of its own, so the coverage per target is what it was one at a time.
jobs_at_once=${FUZZ_JOBS:-$(nproc)}
[[ $jobs_at_once =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: FUZZ_JOBS must be a whole number above 0, got '$jobs_at_once'" >&2; exit 2; }
echo "==> $jobs_at_once target(s) at a time"
running=0
for target in "${targets[@]}"; do
    if [ "$running" -ge "$jobs_at_once" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    fuzz_one "$target" &
    running=$((running + 1))
done
wait || true

failed=()
summary=()
for target in "${targets[@]}"; do
    work=$out/$target
    if [ ! -f "$work/summary" ]; then
        failed+=("$target")
        summary+=("$(printf '%-11s did not report (see %s)' "$target" "$work/log")")
        continue
    fi
    summary+=("$(cat "$work/summary")")
    if [ -f "$work/report" ]; then
        failed+=("$target")
        echo "--> $target failed"
        cat "$work/report"
    fi
done

echo
echo "==> summary (build ${build_seconds}s; output in $out)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: ${failed[*]} found a crash, hang or out-of-memory (inputs and logs above)" >&2
    exit 1
fi
