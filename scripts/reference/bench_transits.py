#!/usr/bin/env python3
"""Times the pyswisseph transit search of generate_transits.py (a fine scan + bisection; one natal chart, one
year, all exact hits) for comparison with `astro-bench transits`. Run by scripts/bench-transits.sh."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import generate_transits as g  # noqa: E402
import swisseph as swe  # noqa: E402

count = int(sys.argv[1]) if len(sys.argv) > 1 else 3
swe.set_ephe_path(os.environ.get("SE_EPHE_PATH", "/usr/share/libswe/ephe"))
jd = g.jd_of("1990-10-07", "12:00")
points = g.natal_points(jd, 50.4501, 30.5234)
start = g.jd_of("2025-03-01")
g.transits(points, start, start + 365)
t0 = time.perf_counter()
for _ in range(count):
    hits = g.transits(points, start, start + 365)
elapsed = time.perf_counter() - t0
print(f"python transits: {count} searches in {elapsed:.3f} s = {count / elapsed:.3f} searches/s ({len(hits)} exact hits each)")
