#!/usr/bin/env bash
# Transit search throughput: astro-bench transits (Swift, release) and the pyswisseph search of
# scripts/reference/generate_transits.py, one after the other in the same run. Not run by CI.
#   bash scripts/bench-transits.sh [swift-count] [python-count]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product astro-bench >/dev/null
"$(swift build -c release --show-bin-path)/astro-bench" transits --count "${1:-20}"
python3 scripts/reference/bench_transits.py "${2:-3}"
