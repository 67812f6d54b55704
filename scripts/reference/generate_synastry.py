#!/usr/bin/env python3
"""Generates Tests/ChartEngineTests/Fixtures/synastry_reference.json: synastry, composite and Davison charts.

An implementation of CONTRACT.md's "Charts for two" rules independent of the Swift code. Births are given in UTC
(local time reading is tested by generate_natal_charts.py); positions and houses come from pyswisseph (its own copy
of the Swiss Ephemeris) on the same data files as Debian's libswe.

    pip install pyswisseph==2.10.3.2
    python3 scripts/reference/generate_synastry.py            # from the package root

Options: --ephe-path DIR (default: $SE_EPHE_PATH or /usr/share/libswe/ephe), --output FILE.

Rules:
- natal: jd = swe.julday(y, m, d, h + min/60) (UTC taken as UT); planets swe.calc_ut(jd, p, FLG_SWIEPH|FLG_SPEED);
  houses swe.houses_ex(jd, lat, lon, letter), Porphyry when Placidus or Koch fail (polar circles).
- synastry: the points of a chart are Sun..Pluto with their longitude speeds, ASC and MC with speed 0 (a chart
  stores no angle speeds). For every (point of A, point of B): separation = smaller angle in [0, 180], the
  type whose |separation - angle| <= its maximum orb (8/6/7/7/8, or min(that, angleMaxOrb) when the case sets one
  and a point is an angle). isApplying: both longitudes moved linearly by speed * DT, the orb then is strictly
  smaller. Overlays: each point of one chart placed in the other's cusps (cusp i <= lon < cusp i+1).
- composite: each planet's longitude is the midpoint of the two along the shorter arc, computed here as
  a + d/2 with d = (b - a) mod 360 taken into (-180, 180]; d = 180 exactly (opposite) gives a + 90. Latitude and
  speed are the means. MC = the midpoint of the MCs; ARMC = the right ascension of that ecliptic point, here from
  swe.cotrans((MC, 0, 1), -eps); eps = the mean obliquity (swe.calc_ut(jdMean, ECL_NUT)[0][1]) of the mean Julian
  day; cusps = swe.houses_armc(ARMC, mean latitude, eps, letter of A's system), Porphyry when that fails. Aspects
  among the composite planets as natal (pair order Sun-Moon .. Neptune-Pluto) with the mean speeds.
- Davison: jd = (jdA + jdB) / 2; the place is the great-circle midpoint, here by the spherical midpoint formula
  (lat_m = atan2(sin p1 + sin p2, sqrt((cos p1 + cos p2 cos dl)^2 + (cos p2 sin dl)^2)),
  lon_m = lon1 + atan2(cos p2 sin dl, cos p1 + cos p2 cos dl)), longitude reduced to (-180, 180]; then a natal
  chart there (A's house system).

Guards as the natal generator's: no orb within 1e-6 degree of its maximum, no aspect exact within DT, no point
within 1e-7 degree of a cusp of the chart it is placed in (the script exits instead; pick another time).
"""

import argparse
import datetime as dt
import json
import math
import os
import sys

import swisseph as swe

PYSWISSEPH_VERSION = "2.10.3.2"
PLANETS = [("Sun", swe.SUN), ("Moon", swe.MOON), ("Mercury", swe.MERCURY), ("Venus", swe.VENUS),
           ("Mars", swe.MARS), ("Jupiter", swe.JUPITER), ("Saturn", swe.SATURN), ("Uranus", swe.URANUS),
           ("Neptune", swe.NEPTUNE), ("Pluto", swe.PLUTO)]
ASPECTS = [("Conjunction", 0.0, 8.0), ("Sextile", 60.0, 6.0), ("Square", 90.0, 7.0), ("Trine", 120.0, 7.0),
           ("Opposition", 180.0, 8.0)]
LETTERS = {"placidus": b"P", "koch": b"K", "porphyry": b"O", "regiomontanus": b"R", "campanus": b"C",
           "equal": b"E", "wholeSign": b"W"}
FLAGS = swe.FLG_SWIEPH | swe.FLG_SPEED
DT = 1e-6
CUSP_GUARD = 1e-7
ORB_LIMIT_GUARD = 1e-6

# (id, tags, birth A, birth B, angleMaxOrb); a birth is (location, UTC date, UTC time, lat, lon, house system)
CASES = [
    ("kyiv-london", ["ordinary"],
     ("Kyiv", "1990-10-07", "12:00", 50.4501, 30.5234, "placidus"),
     ("London", "1992-03-15", "08:30", 51.5072, -0.1276, "placidus"), None),
    ("kyiv-london-tight-angles", ["angle-orbs"],
     ("Kyiv", "1990-10-07", "12:00", 50.4501, 30.5234, "placidus"),
     ("London", "1992-03-15", "08:30", 51.5072, -0.1276, "placidus"), 3.0),
    ("suva-apia-antimeridian", ["antimeridian"],
     ("Suva", "1985-06-01", "03:15", -18.1248, 178.4501, "placidus"),
     ("Apia", "1987-11-20", "22:40", -13.8507, -171.7514, "placidus"), None),
    ("quito-lima-equator", ["equator"],
     ("Bogota", "1970-02-02", "14:05", 4.7110, -74.0721, "placidus"),
     ("Lima", "1975-09-09", "19:50", -12.0464, -77.0428, "koch"), None),
    ("auckland-honolulu-both", ["antimeridian", "equator"],
     ("Auckland", "2001-12-24", "10:10", -36.8485, 174.7633, "placidus"),
     ("Honolulu", "1998-04-04", "04:04", 21.3069, -157.8583, "placidus"), None),
    ("tromso-longyearbyen-polar", ["polar"],
     ("Tromso", "1980-01-10", "09:00", 69.6492, 18.9553, "placidus"),
     ("Longyearbyen", "1983-07-19", "16:20", 78.2232, 15.6267, "placidus"), None),
    ("sydney-new-york", ["ordinary", "southern"],
     ("Sydney", "1966-05-05", "05:55", -33.8688, 151.2093, "equal"),
     ("New York", "1969-07-20", "20:17", 40.7128, -74.0060, "placidus"), None),
    ("cape-town-tokyo-wide-years", ["ordinary", "wide-years"],
     ("Cape Town", "1910-01-01", "00:00", -33.9249, 18.4241, "placidus"),
     ("Tokyo", "2090-12-31", "23:59", 35.6762, 139.6503, "wholeSign"), None),
]


def arc(a, b):
    d = abs(a - b) % 360.0
    return 360.0 - d if d > 180.0 else d


def house_of(lon, cusps, label):
    found = []
    for i in range(12):
        start, end = cusps[i], cusps[(i + 1) % 12]
        if start < end:
            inside = start <= lon < end
        elif start > end:
            inside = lon >= start or lon < end
        else:
            inside = False
        if inside:
            found.append(i + 1)
    if len(found) != 1:
        sys.exit(f"{label}: longitude {lon} is in houses {found}")
    if min(arc(lon, c) for c in cusps) <= CUSP_GUARD:
        sys.exit(f"{label}: longitude {lon} is on a cusp; pick another case")
    return found[0]


def houses(label, jd, lat, lon, system):
    used = system
    try:
        cusps, ascmc = swe.houses_ex(jd, lat, lon, LETTERS[system])
    except swe.Error:
        if system not in ("placidus", "koch"):
            raise
        used = "porphyry"
        cusps, ascmc = swe.houses_ex(jd, lat, lon, LETTERS[used])
    return list(cusps[:12]), ascmc[0], ascmc[1], used


def natal(label, jd, lat, lon, system):
    cusps, asc, mc, used = houses(label, jd, lat, lon, system)
    planets = []
    for name, number in PLANETS:
        xx, flag = swe.calc_ut(jd, number, FLAGS)
        if not flag & swe.FLG_SWIEPH:
            sys.exit(f"{label}: {name} not from the Swiss Ephemeris files")
        planets.append({"name": name, "longitude": xx[0], "latitude": xx[1], "speed": xx[3],
                        "house": house_of(xx[0], cusps, f"{label} {name}")})
    return {"julianDayUT": jd, "latitude": lat, "longitude": lon, "houseSystem": used,
            "houseSystemRequested": system if used != system else None, "planets": planets,
            "cusps": cusps, "ascendant": asc, "midheaven": mc}


def find(label, first, second, limit_for):
    separation = arc(first[1], second[1])
    matches = []
    for name, angle, seed in ASPECTS:
        limit = limit_for(seed)
        orb = abs(separation - angle)
        if abs(orb - limit) <= ORB_LIMIT_GUARD:
            sys.exit(f"{label}: {first[0]}-{second[0]} {name} orb {orb} at its limit")
        if orb <= limit:
            matches.append((orb, name, angle, limit))
    if not matches:
        return None
    orb, name, angle, limit = min(matches)
    if orb <= abs(second[2] - first[2]) * DT:
        sys.exit(f"{label}: {first[0]}-{second[0]} {name} exact within DT")
    later = abs(arc(first[1] + first[2] * DT, second[1] + second[2] * DT) - angle)
    return name, orb, limit, later < orb


def points(chart):
    return ([(p["name"], p["longitude"], p["speed"]) for p in chart["planets"]]
            + [("ASC", chart["ascendant"], 0.0), ("MC", chart["midheaven"], 0.0)])


def synastry(label, a, b, angle_max):
    aspects = []
    for first in points(a):
        for second in points(b):
            angle = first[0] in ("ASC", "MC") or second[0] in ("ASC", "MC")
            limit_for = (lambda seed: min(seed, angle_max)) if (angle and angle_max is not None) else (lambda s: s)
            found = find(label, first, second, limit_for)
            if found:
                name, orb, limit, applying = found
                aspects.append({"a": first[0], "b": second[0], "type": name, "orb": orb, "maxOrb": limit,
                                "isApplying": applying})
    overlays_a = [{"point": p[0], "house": house_of(p[1], b["cusps"], f"{label} A.{p[0]} in B")} for p in points(a)]
    overlays_b = [{"point": p[0], "house": house_of(p[1], a["cusps"], f"{label} B.{p[0]} in A")} for p in points(b)]
    return {"aspects": aspects, "overlaysAInB": overlays_a, "overlaysBInA": overlays_b}


def midpoint(a, b):
    d = (b - a) % 360.0
    if d > 180.0:
        d -= 360.0
    return (a + d / 2.0) % 360.0


def planet_aspects(label, planets):
    found = []
    for i, first in enumerate(planets):
        for second in planets[i + 1:]:
            hit = find(label, (first["name"], first["longitude"], first["speed"]),
                       (second["name"], second["longitude"], second["speed"]), lambda seed: seed)
            if hit:
                found.append({"planet1": first["name"], "planet2": second["name"], "type": hit[0], "orb": hit[1],
                              "isApplying": hit[3]})
    return found


def composite(label, a, b, system):
    jd = (a["julianDayUT"] + b["julianDayUT"]) / 2.0
    eps = swe.calc_ut(jd, swe.ECL_NUT)[0][1]
    mc = midpoint(a["midheaven"], b["midheaven"])
    armc = swe.cotrans((mc, 0.0, 1.0), -eps)[0]
    lat = (a["latitude"] + b["latitude"]) / 2.0
    used = system
    try:
        cusps, ascmc = swe.houses_armc(armc, lat, eps, LETTERS[system])
    except swe.Error:
        if system not in ("placidus", "koch"):
            raise
        used = "porphyry"
        cusps, ascmc = swe.houses_armc(armc, lat, eps, LETTERS[used])
    cusps = list(cusps[:12])
    planets = []
    for pa, pb in zip(a["planets"], b["planets"]):
        lon = midpoint(pa["longitude"], pb["longitude"])
        speed = (pa["speed"] + pb["speed"]) / 2.0
        planets.append({"name": pa["name"], "longitude": lon, "latitude": (pa["latitude"] + pb["latitude"]) / 2.0,
                        "speed": speed, "house": house_of(lon, cusps, f"{label} composite {pa['name']}")})
    return {"julianDayUT": jd, "meanObliquity": eps, "armc": armc, "latitude": lat, "houseSystem": used,
            "houseSystemRequested": system if used != system else None, "planets": planets, "cusps": cusps,
            "ascendant": ascmc[0], "midheaven": mc, "aspects": planet_aspects(label + " composite", planets)}


def davison(label, a, b, system):
    p1, p2 = math.radians(a["latitude"]), math.radians(b["latitude"])
    dl = math.radians(b["longitude"] - a["longitude"])
    bx, by = math.cos(p2) * math.cos(dl), math.cos(p2) * math.sin(dl)
    lat = math.degrees(math.atan2(math.sin(p1) + math.sin(p2), math.hypot(math.cos(p1) + bx, by)))
    lon = a["longitude"] + math.degrees(math.atan2(by, math.cos(p1) + bx))
    lon = (lon + 180.0) % 360.0 - 180.0
    if lon == -180.0:
        lon = 180.0
    jd = (a["julianDayUT"] + b["julianDayUT"]) / 2.0
    chart = natal(label + " davison", jd, lat, lon, system)
    chart["aspects"] = planet_aspects(label + " davison", chart["planets"])
    return chart


def birth(label, spec):
    location, date, time, lat, lon, system = spec
    y, m, d = (int(x) for x in date.split("-"))
    hh, mm = (int(x) for x in time.split(":"))
    jd = swe.julday(y, m, d, hh + mm / 60.0, swe.GREG_CAL)
    return ({"birthDate": date, "birthTime": time, "timezone": "UTC", "latitude": lat, "longitude": lon,
             "locationName": location, "houseSystem": system}, natal(label, jd, lat, lon, system))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--ephe-path", default=os.environ.get("SE_EPHE_PATH") or "/usr/share/libswe/ephe")
    parser.add_argument("--output",
                        default=os.path.join(root, "Tests", "ChartEngineTests", "Fixtures", "synastry_reference.json"))
    args = parser.parse_args()
    swe.set_ephe_path(args.ephe_path)
    if swe.version != "2.10.03":
        sys.exit(f"expected Swiss Ephemeris 2.10.03 (pyswisseph {PYSWISSEPH_VERSION}), found {swe.version}")

    cases = []
    for case_id, tags, spec_a, spec_b, angle_max in CASES:
        input_a, a = birth(case_id + " A", spec_a)
        input_b, b = birth(case_id + " B", spec_b)
        cases.append({
            "id": case_id, "tags": tags, "a": input_a, "b": input_b, "angleMaxOrb": angle_max,
            "natalA": a, "natalB": b,
            "synastry": synastry(case_id, a, b, angle_max),
            "composite": composite(case_id, a, b, spec_a[5]),
            "davison": davison(case_id, a, b, spec_a[5]),
        })
    output = {
        "source": "scripts/reference/generate_synastry.py (pyswisseph " + PYSWISSEPH_VERSION
                  + ", Swiss Ephemeris files " + args.ephe_path + "); rules in the script's docstring",
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pyswissephVersion": PYSWISSEPH_VERSION,
        "swissEphemerisVersion": swe.version,
        "applyingTimeStepDays": DT,
        "caseCount": len(cases),
        "cases": cases,
    }
    with open(args.output, "w") as file:
        json.dump(output, file, indent=1, sort_keys=True)
        file.write("\n")
    print(f"wrote {len(cases)} cases to {args.output}")


if __name__ == "__main__":
    main()
