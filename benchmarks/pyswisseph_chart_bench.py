#!/usr/bin/env python3
"""The Python baseline for `astro-bench chart`: complete natal charts per second with pyswisseph.

One "complete chart" is: the Sun..Pluto with SEFLG_SPEED (swe.calc_ut), Placidus houses (swe.houses_ex), sign and
house of every planet, the five major aspects between all 45 planet pairs (orbs 8/8/7/7/6, applying or
separating from the speeds) and json.dumps of a dict shaped like the NatalChart JSON of CONTRACT.md.

Each chart is for a different instant (the Julian day steps by 0.9973 days through 1950-2050), so libswe's
cache of the last computed position never answers for it.

    pip install pyswisseph==2.10.3.2
    python3 benchmarks/pyswisseph_chart_bench.py [--count N] [--ephe-path DIR]

Prints one JSON line: {"charts_per_sec": ..., "count": N, "seconds": ...}.
"""

import argparse
import datetime as dt
import json
import math
import os
import time
import uuid

import swisseph as swe

PLANETS = [
    ("Sun", swe.SUN),
    ("Moon", swe.MOON),
    ("Mercury", swe.MERCURY),
    ("Venus", swe.VENUS),
    ("Mars", swe.MARS),
    ("Jupiter", swe.JUPITER),
    ("Saturn", swe.SATURN),
    ("Uranus", swe.URANUS),
    ("Neptune", swe.NEPTUNE),
    ("Pluto", swe.PLUTO),
]
SIGNS = ["Aries", "Taurus", "Gemini", "Cancer", "Leo", "Virgo",
         "Libra", "Scorpio", "Sagittarius", "Capricorn", "Aquarius", "Pisces"]
# (name, angle, orb in degrees), the seed's orbs.
ASPECTS = [("Conjunction", 0.0, 8.0), ("Opposition", 180.0, 8.0), ("Trine", 120.0, 7.0),
           ("Square", 90.0, 7.0), ("Sextile", 60.0, 6.0)]
FLAGS = swe.FLG_SWIEPH | swe.FLG_SPEED
START_JD = 2433282.5  # 1950-01-01 00:00 UT
LATITUDE, LONGITUDE = 50.4501, 30.5234  # Kyiv


def house_of(longitude, cusps):
    """The house (1-12) whose cusp range, wrapping at 360, holds the longitude."""
    for index in range(12):
        start = cusps[index]
        end = cusps[(index + 1) % 12]
        width = (end - start) % 360
        if (longitude - start) % 360 < width:
            return index + 1
    return 12


def aspects_between(planets):
    found = []
    for i in range(len(planets)):
        name1, lon1, speed1 = planets[i]
        for j in range(i + 1, len(planets)):
            name2, lon2, speed2 = planets[j]
            delta = (lon2 - lon1 + 180.0) % 360.0 - 180.0  # signed, in [-180, 180)
            separation = abs(delta)
            for aspect, angle, max_orb in ASPECTS:
                orb = abs(separation - angle)
                if orb <= max_orb:
                    # d(separation)/dt, then d(orb)/dt: the aspect applies while the orb shrinks.
                    separation_rate = math.copysign(1.0, delta) * (speed2 - speed1)
                    orb_rate = separation_rate if separation >= angle else -separation_rate
                    found.append({
                        "id": str(uuid.uuid4()),
                        "planet1": name1,
                        "planet2": name2,
                        "type": aspect,
                        "orb": round(orb, 2),
                        "isApplying": orb_rate < 0,
                    })
                    break
    return found


def complete_chart(jd):
    year, month, day, hour = swe.revjul(jd)
    utc = dt.datetime(year, month, day, tzinfo=dt.timezone.utc) + dt.timedelta(hours=hour)
    cusps, ascmc = swe.houses_ex(jd, LATITUDE, LONGITUDE, b"P")
    planets = []
    planet_rows = []
    for name, number in PLANETS:
        xx, retflag = swe.calc_ut(jd, number, FLAGS)
        if not retflag & swe.FLG_SWIEPH:
            raise SystemExit(f"{name}: not computed from the Swiss Ephemeris files (retflag {retflag})")
        longitude, latitude, speed = xx[0], xx[1], xx[3]
        planets.append((name, longitude, speed))
        planet_rows.append({
            "id": str(uuid.uuid4()),
            "name": name,
            "longitude": longitude,
            "latitude": latitude,
            "sign": SIGNS[int(longitude // 30) % 12],
            "house": house_of(longitude, cusps),
            "isRetrograde": speed < 0,
            "speed": speed,
        })
    chart = {
        "birthDate": utc.strftime("%Y-%m-%d"),
        "birthTime": utc.strftime("%H:%M"),
        "timezone": "UTC",
        "utc": utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "julianDayUT": jd,
        "latitude": LATITUDE,
        "longitude": LONGITUDE,
        "locationName": "Kyiv, Ukraine",
        "houseSystem": "placidus",
        "warnings": [],
        "planets": planet_rows,
        "houses": [{"id": str(uuid.uuid4()), "number": n + 1, "cusp": cusp, "sign": SIGNS[int(cusp // 30) % 12]}
                   for n, cusp in enumerate(cusps)],
        "aspects": aspects_between(planets),
        "ascendant": ascmc[0],
        "midheaven": ascmc[1],
        "calculatedAt": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return json.dumps(chart)


def main():
    parser = argparse.ArgumentParser(description="pyswisseph complete-chart benchmark")
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--ephe-path", default=os.environ.get("SE_EPHE_PATH") or "/usr/share/libswe/ephe")
    args = parser.parse_args()
    swe.set_ephe_path(args.ephe_path)

    for i in range(200):  # warm-up: open the files, fill the CPU caches
        complete_chart(START_JD + (i % 36525) * 0.9973)
    started = time.perf_counter()
    total = 0
    for i in range(args.count):
        total += len(complete_chart(START_JD + (i % 36525) * 0.9973))
    seconds = time.perf_counter() - started
    assert total > 0
    print(json.dumps({"charts_per_sec": round(args.count / seconds, 1), "count": args.count,
                      "seconds": round(seconds, 3)}))


if __name__ == "__main__":
    main()
