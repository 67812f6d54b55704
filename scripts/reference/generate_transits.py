#!/usr/bin/env python3
"""Generates Tests/ChartEngineTests/Fixtures/transits_reference.json: exact transit instants, solar returns and
secondary progressions for natal charts, independently of the Swift code.

    pip install pyswisseph==2.10.3.2 numpy
    python3 scripts/reference/generate_transits.py            # from the package root

Options: --ephe-path DIR (default: $SE_EPHE_PATH or /usr/share/libswe/ephe), --output FILE.

Rules (CONTRACT.md, "Transits, progressions and solar returns"):
- natal chart: birth date and time given in UTC; jd = swe.julday(y, m, d, h + min/60); planets Sun..Pluto from
  swe.calc_ut(jd, body, FLG_SWIEPH | FLG_SPEED); ASC and MC from swe.houses_ex(jd, lat, lon, b"P") (Porphyry
  when Placidus fails inside the polar circles: the angles are the same).
- transits: for each transiting planet Sun..Pluto, each natal point (ten planets, ASC, MC) and each exact angle
  0, 60, 90, 120, 180, 240, 270, 300 degrees (transiting minus natal longitude), every instant in [from, to) where
  d(t) = transiting longitude - natal longitude - angle, wrapped into [-180, 180), changes sign. Found by a plain
  fine scan (no knowledge of stations): positions every SCAN_STEP[planet] days, a sign change between two samples
  with |d| < 90 on both sides is a root (the wrap at +-180 is not), refined by bisection to 1e-7 day. The step
  is far below the time any planet needs to leave and re-cross a point near a station, so retrograde triple
  passes appear as three roots. Each hit records the transiting speed at the root (retrograde when < 0).
- solar return for the year of the range start: swe.solcross_ut(natal Sun longitude, anniversary jd - 5), the
  Swiss Ephemeris' own search (anniversary = the birth's UTC month, day and time in that year).
- secondary progression for the range start: jd_p = jd + (jd_target - jd) / 365.242199; planets from
  swe.calc_ut(jd_p) and ASC, MC and cusps from swe.houses_ex(jd_p, birth lat, lon) (the progressed instant's
  own angles, "progressed-instant-armc").
"""

import argparse
import datetime as dt
import json
import os
import sys

import numpy as np
import swisseph as swe

PYSWISSEPH_VERSION = "2.10.3.2"
PLANETS = [("Sun", swe.SUN), ("Moon", swe.MOON), ("Mercury", swe.MERCURY), ("Venus", swe.VENUS),
           ("Mars", swe.MARS), ("Jupiter", swe.JUPITER), ("Saturn", swe.SATURN), ("Uranus", swe.URANUS),
           ("Neptune", swe.NEPTUNE), ("Pluto", swe.PLUTO)]
SCAN_STEP = {"Moon": 0.02, "Sun": 0.1, "Mercury": 0.05, "Venus": 0.05, "Mars": 0.1, "Jupiter": 0.25,
             "Saturn": 0.25, "Uranus": 0.25, "Neptune": 0.25, "Pluto": 0.25}
ANGLES = [0.0, 60.0, 90.0, 120.0, 180.0, 240.0, 270.0, 300.0]
FLAGS = swe.FLG_SWIEPH | swe.FLG_SPEED
YEAR_DAYS = 365.242199

# (name, UTC birth date, UTC time, lat, lon, range start, range end). Ranges cross a year boundary except
# where noted; "future" is born after its range (answered all the same); "tromso"/"mcmurdo" are polar charts.
CHARTS = [
    ("kyiv-1990", "1990-10-07", "12:00", 50.4501, 30.5234, "2025-03-01", "2026-03-01"),
    ("london-1985", "1985-01-15", "06:30", 51.5074, -0.1278, "2025-07-01", "2026-07-01"),
    ("newyork-1972", "1972-06-21", "17:45", 40.7128, -74.0060, "2024-01-01", "2025-01-01"),
    ("tokyo-2001", "2001-03-11", "02:10", 35.6762, 139.6503, "2025-10-15", "2026-10-15"),
    ("sydney-1968", "1968-11-30", "22:05", -33.8688, 151.2093, "2025-12-01", "2026-12-01"),
    ("saopaulo-1995", "1995-08-08", "14:20", -23.5505, -46.6333, "2024-06-01", "2025-06-01"),
    ("tromso-1979", "1979-12-21", "11:00", 69.6492, 18.9553, "2025-01-10", "2026-01-10"),
    ("mcmurdo-2010", "2010-06-21", "03:00", -77.8419, 166.6863, "2025-04-01", "2026-04-01"),
    ("future-2040", "2040-05-05", "09:09", 48.8566, 2.3522, "2030-02-01", "2031-02-01"),
    ("cairo-1955", "1955-02-24", "04:40", 30.0444, 31.2357, "2025-09-01", "2026-09-01"),
    ("mumbai-1988", "1988-09-17", "19:55", 19.0760, 72.8777, "2025-05-20", "2026-05-20"),
    ("reykjavik-1963", "1963-04-02", "08:15", 64.1466, -21.9426, "2024-11-11", "2025-11-11"),
    ("capetown-1999", "1999-12-31", "23:59", -33.9249, 18.4241, "2025-12-31", "2026-12-31"),
    ("lima-1977", "1977-07-07", "07:07", -12.0464, -77.0428, "2025-02-14", "2026-02-14"),
    ("anchorage-1950", "1950-03-20", "16:00", 61.2181, -149.9003, "2026-01-01", "2027-01-01"),
    ("auckland-2005", "2005-10-25", "20:30", -36.8485, 174.7633, "2025-08-08", "2026-08-08"),
    ("berlin-1930", "1930-05-12", "13:13", 52.5200, 13.4050, "1990-06-01", "1991-06-01"),
    ("honolulu-2015", "2015-02-28", "10:45", 21.3069, -157.8583, "2099-03-01", "2100-03-01"),
    ("quito-1983", "1983-03-21", "00:00", -0.1807, -78.4678, "2025-06-21", "2026-06-21"),
    ("longyearbyen-1996", "1996-01-01", "12:00", 78.2232, 15.6267, "2025-10-01", "2026-10-01"),
]


def jd_of(date, time="00:00"):
    y, m, d = (int(x) for x in date.split("-"))
    hh, mm = (int(x) for x in time.split(":"))
    return swe.julday(y, m, d, hh + mm / 60.0)


def wrap(x):
    return (x + 180.0) % 360.0 - 180.0


def lon(body, jd):
    return swe.calc_ut(jd, body, FLAGS)[0]


def natal_points(jd, lat, lon_):
    points = {name: lon(body, jd)[0] for name, body in PLANETS}
    try:
        cusps, ascmc = swe.houses_ex(jd, lat, lon_, b"P")
    except swe.Error:
        cusps, ascmc = swe.houses_ex(jd, lat, lon_, b"O")
    points["ASC"] = ascmc[0]
    points["MC"] = ascmc[1]
    return points


def transits(points, start, end):
    hits = []
    for name, body in PLANETS:
        step = SCAN_STEP[name]
        times = np.arange(start - step, end + 2 * step, step)
        longs = np.array([lon(body, t)[0] for t in times])
        for point, natal in points.items():
            for angle in ANGLES:
                d = wrap(longs - natal - angle)
                a, b = d[:-1], d[1:]
                idx = np.nonzero(((a < 0) != (b < 0)) & (np.abs(a) < 90) & (np.abs(b) < 90))[0]
                for i in idx:
                    lo, hi, dlo = times[i], times[i + 1], a[i]
                    while hi - lo > 1e-7:
                        mid = (lo + hi) / 2
                        dm = wrap(lon(body, mid)[0] - natal - angle)
                        if (dm < 0) == (dlo < 0):
                            lo, dlo = mid, dm
                        else:
                            hi = mid
                    root = (lo + hi) / 2
                    if start <= root < end:
                        hits.append([name, point, angle, round(root, 8), round(lon(body, root)[3], 6)])
    hits.sort(key=lambda h: (h[0], h[1], h[2], h[3]))
    return hits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ephe-path", default=os.environ.get("SE_EPHE_PATH", "/usr/share/libswe/ephe"))
    parser.add_argument("--output", default="Tests/ChartEngineTests/Fixtures/transits_reference.json")
    args = parser.parse_args()
    swe.set_ephe_path(args.ephe_path)
    cases = []
    triple = 0
    for name, date, time, lat, lon_, start_date, end_date in CHARTS:
        jd = jd_of(date, time)
        points = natal_points(jd, lat, lon_)
        start, end = jd_of(start_date), jd_of(end_date)
        hits = transits(points, start, end)
        groups = {}
        for h in hits:
            groups.setdefault((h[0], h[1], h[2]), []).append((h[3], h[4]))
        # A triple pass: three hits of one planet (not the Sun or Moon, which never retrograde) on one target
        # within 300 days, direct, retrograde, direct.
        for key, roots in groups.items():
            if key[0] in ("Sun", "Moon"):
                continue
            for i in range(len(roots) - 2):
                if roots[i + 2][0] - roots[i][0] < 300 and roots[i][1] > 0 > roots[i + 1][1] and roots[i + 2][1] > 0:
                    triple += 1
        natal_sun = points["Sun"]
        year = int(start_date[:4])
        anniversary = jd_of(f"{year}{date[4:]}", time)
        solar_return = swe.solcross_ut(natal_sun, anniversary - 5, swe.FLG_SWIEPH)
        progressed_jd = jd + (start - jd) / YEAR_DAYS
        try:
            cusps, ascmc = swe.houses_ex(progressed_jd, lat, lon_, b"P")
        except swe.Error:
            cusps, ascmc = swe.houses_ex(progressed_jd, lat, lon_, b"O")
        cases.append({
            "name": name, "birthDate": date, "birthTime": time, "latitude": lat, "longitude": lon_,
            "from": start_date, "to": end_date, "fromJD": start, "toJD": end,
            "hits": hits,
            "solarReturnYear": year, "solarReturnJD": solar_return,
            "progressedJD": progressed_jd,
            "progressedPlanets": [lon(body, progressed_jd)[0] for _, body in PLANETS],
            "progressedAscendant": ascmc[0], "progressedMidheaven": ascmc[1],
        })
        print(f"{name}: {len(hits)} hits", file=sys.stderr)
    if triple == 0:
        sys.exit("no retrograde triple pass in the fixtures; pick other ranges")
    out = {
        "source": "scripts/reference/generate_transits.py (pyswisseph, independent of the Swift code)",
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pyswissephVersion": PYSWISSEPH_VERSION,
        "swissEphemerisVersion": swe.version,
        "hitColumns": ["transiting", "natal", "angle", "exactJD", "transitingSpeed"],
        "triplePasses": triple,
        "cases": cases,
    }
    with open(args.output, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.output}: {len(cases)} charts, {triple} triple passes", file=sys.stderr)


if __name__ == "__main__":
    main()
