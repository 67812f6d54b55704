#!/usr/bin/env python3
"""Generates Tests/ChartEngineTests/Fixtures/natal_reference.json: whole natal charts from local birth data.

An implementation of CONTRACT.md's NatalChart rules independent of the Swift code: the local wall time is read
with the standard library's zoneinfo on the system time zone database (not Foundation's), positions and houses
come from pyswisseph (which bundles its own copy of the Swiss Ephemeris) on the same data files as Debian's
libswe, and signs, houses, retrograde flags and aspects are computed here from those numbers.

    pip install pyswisseph==2.10.3.2
    python3 scripts/reference/generate_natal_charts.py            # from the package root

Options: --ephe-path DIR (default: $SE_EPHE_PATH or /usr/share/libswe/ephe), --output FILE.

Rules, as in CONTRACT.md:
- utc: the local date and time in the IANA zone, resolved by zoneinfo (a wall time in a DST gap or overlap is
  refused here: those are tested elsewhere); julianDayUT = swe.julday(y, m, d, h + min/60 + s/3600) of the UTC
  date and time, Gregorian calendar, UTC taken as UT.
- planets Sun..Pluto: swe.calc_ut(jd, body, FLG_SWIEPH | FLG_SPEED); sign = floor(longitude / 30);
  isRetrograde = longitude speed < 0; house = the i with cusp i <= longitude < cusp i+1, going round (house 12
  runs from cusp 12 to cusp 1 across 0 degrees).
- houses: swe.houses_ex(jd, lat, lon, letter); when Placidus or Koch fail (inside the polar circles) the
  Porphyry cusps are used and houseSystem names Porphyry, houseSystemRequested the one asked for.
- aspects, for the 45 pairs of the ten planets, planet1 the earlier one in Sun..Pluto order and the list in
  that pair order (Sun-Moon, Sun-Mercury, ..., Neptune-Pluto), the engine's documented convention:
  separation = the smaller angle between the longitudes, in [0, 180]; for Conjunction 0 / Sextile 60 /
  Square 90 / Trine 120 / Opposition 180 with maximum orbs 8 / 6 / 7 / 7 / 8, orb = |separation - angle| and the
  type matches when orb <= its maximum (the smallest orb wins if two matched, which these orbs cannot do).
  isApplying: the orb is recomputed DT = 1e-6 day later with both longitudes moved linearly
  (longitude + speed * DT) and the aspect is applying when that orb is strictly smaller than the orb now
  (equal speeds: separating). Motion is linear over DT, so this is the sign of d(orb)/dt unless exactness is
  passed within DT; the generator refuses a case where an aspect's orb is at most |speed2 - speed1| * DT.

Guards so that a Swift implementation of the same rules cannot disagree by rounding alone: no planet within
1e-7 degree of a house cusp, no orb within 1e-6 degree of a maximum orb (the script exits instead; pick another
time). The sign-boundary cases put a planet within 0.01 degree of a sign boundary on purpose; sign placement
is floor(longitude / 30) of the same double, so no guard is needed there.
"""

import argparse
import datetime as dt
import json
import math
import os
import re
import sys
import zoneinfo

import swisseph as swe

PYSWISSEPH_VERSION = "2.10.3.2"
TZDATA_ZI = "/usr/share/zoneinfo/tzdata.zi"

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
SIGNS = ["Aries", "Taurus", "Gemini", "Cancer", "Leo", "Virgo", "Libra", "Scorpio", "Sagittarius", "Capricorn",
         "Aquarius", "Pisces"]
# (type, exact angle, maximum orb)
ASPECTS = [
    ("Conjunction", 0.0, 8.0),
    ("Sextile", 60.0, 6.0),
    ("Square", 90.0, 7.0),
    ("Trine", 120.0, 7.0),
    ("Opposition", 180.0, 8.0),
]
HOUSE_LETTERS = {
    "placidus": b"P",
    "koch": b"K",
    "porphyry": b"O",
    "regiomontanus": b"R",
    "campanus": b"C",
    "equal": b"E",
    "wholeSign": b"W",
}
FLAGS = swe.FLG_SWIEPH | swe.FLG_SPEED
DT = 1e-6  # days, for isApplying
CUSP_GUARD = 1e-7  # degrees
ORB_LIMIT_GUARD = 1e-6  # degrees

# (id, location name, birth date, birth time, IANA zone, latitude, longitude, house system, tags)
CASES = [
    # Edges of the accepted date range, the leap day.
    ("greenwich-1900-start", "Greenwich, UK", "1900-01-01", "00:00", "UTC", 51.4769, -0.0005, "placidus",
     ["edge-date", "europe"]),
    ("los-angeles-2100-end", "Los Angeles, USA", "2100-12-31", "23:59", "America/Los_Angeles", 34.0522, -118.2437,
     "placidus", ["edge-date", "north-america"]),
    ("kyiv-leap-day-2000", "Kyiv, Ukraine", "2000-02-29", "10:15", "Europe/Kyiv", 50.4501, 30.5234, "placidus",
     ["leap-day", "europe"]),
    # Offsets that are not whole hours.
    ("kathmandu-1995", "Kathmandu, Nepal", "1995-04-12", "06:20", "Asia/Kathmandu", 27.7172, 85.3240, "placidus",
     ["odd-offset", "asia"]),
    ("st-johns-1962", "St. John's, Canada", "1962-01-20", "03:40", "America/St_Johns", 47.5615, -52.7126,
     "placidus", ["odd-offset", "north-america"]),
    ("kiritimati-2016", "Kiritimati, Kiribati", "2016-07-04", "18:00", "Pacific/Kiritimati", 1.8721, -157.4278,
     "placidus", ["odd-offset", "oceania"]),
    ("darwin-1950-koch", "Darwin, Australia", "1950-03-03", "03:33", "Australia/Darwin", -12.4634, 130.8456,
     "koch", ["odd-offset", "southern", "oceania", "house-system"]),
    ("mumbai-1947", "Mumbai, India", "1947-08-15", "00:00", "Asia/Kolkata", 19.0760, 72.8777, "placidus",
     ["odd-offset", "asia"]),
    ("honolulu-1999", "Honolulu, USA", "1999-08-11", "05:00", "Pacific/Honolulu", 21.3069, -157.8583, "placidus",
     ["oceania"]),
    ("tehran-1979", "Tehran, Iran", "1979-02-11", "14:00", "Asia/Tehran", 35.6892, 51.3890, "placidus",
     ["odd-offset", "asia"]),
    ("adelaide-1975", "Adelaide, Australia", "1975-06-11", "21:05", "Australia/Adelaide", -34.9285, 138.6007,
     "placidus", ["odd-offset", "southern", "oceania"]),
    # Historical offsets (war time, local mean time with seconds).
    ("kyiv-1941", "Kyiv, Ukraine", "1941-08-15", "12:00", "Europe/Kyiv", 50.4501, 30.5234, "placidus",
     ["historical", "europe"]),
    ("moscow-1919", "Moscow, Russia", "1919-06-01", "12:00", "Europe/Moscow", 55.7558, 37.6173, "placidus",
     ["historical", "europe"]),
    ("new-york-1943-war-time", "New York, USA", "1943-06-01", "12:00", "America/New_York", 40.7128, -74.0060,
     "placidus", ["historical", "north-america"]),
    # Amsterdam Mean Time (+00:19:32) until 1937, as in Debian's tzdata (built with the tz "backzone" data). The
    # main tz data, and ICU's copy of it, make Europe/Amsterdam a link to Europe/Brussels (+00:00) before 1970.
    ("amsterdam-1935", "Amsterdam, Netherlands", "1935-03-10", "08:30", "Europe/Amsterdam", 52.3676, 4.9041,
     "placidus", ["historical", "europe", "tz-backzone"]),
    ("tokyo-1923", "Tokyo, Japan", "1923-09-01", "11:58", "Asia/Tokyo", 35.6762, 139.6503, "placidus",
     ["historical", "asia"]),
    ("cairo-1922", "Cairo, Egypt", "1922-11-04", "17:30", "Africa/Cairo", 30.0444, 31.2357, "placidus",
     ["historical", "africa"]),
    ("sao-paulo-1910", "Sao Paulo, Brazil", "1910-05-18", "22:10", "America/Sao_Paulo", -23.5505, -46.6333,
     "placidus", ["historical", "southern", "south-america"]),
    ("london-1905", "London, UK", "1905-07-14", "09:45", "Europe/London", 51.5072, -0.1276, "placidus",
     ["historical", "europe"]),
    # Every continent, both hemispheres, the whole range of years.
    ("beijing-1949", "Beijing, China", "1949-10-01", "15:00", "Asia/Shanghai", 39.9042, 116.4074, "placidus",
     ["asia"]),
    ("lagos-1960", "Lagos, Nigeria", "1960-10-01", "00:00", "Africa/Lagos", 6.5244, 3.3792, "placidus",
     ["africa"]),
    ("nairobi-1963-equal", "Nairobi, Kenya", "1963-12-12", "00:00", "Africa/Nairobi", -1.2921, 36.8219, "equal",
     ["southern", "africa", "house-system"]),
    ("cape-town-1994-campanus", "Cape Town, South Africa", "1994-04-27", "07:00", "Africa/Johannesburg",
     -33.9249, 18.4241, "campanus", ["southern", "africa", "house-system"]),
    ("buenos-aires-1978-regiomontanus", "Buenos Aires, Argentina", "1978-06-25", "15:00",
     "America/Argentina/Buenos_Aires", -34.6037, -58.3816, "regiomontanus",
     ["southern", "south-america", "house-system"]),
    ("lima-2080-porphyry", "Lima, Peru", "2080-06-21", "12:00", "America/Lima", -12.0464, -77.0428, "porphyry",
     ["southern", "south-america", "house-system"]),
    ("reykjavik-2024-whole-sign", "Reykjavik, Iceland", "2024-04-08", "18:00", "Atlantic/Reykjavik", 64.1466,
     -21.9426, "wholeSign", ["europe", "house-system"]),
    ("bogota-2033", "Bogota, Colombia", "2033-11-02", "04:45", "America/Bogota", 4.7110, -74.0721, "placidus",
     ["south-america"]),
    ("mexico-city-1985", "Mexico City, Mexico", "1985-09-19", "07:17", "America/Mexico_City", 19.4326, -99.1332,
     "placidus", ["north-america"]),
    ("anchorage-2090", "Anchorage, USA", "2090-10-31", "23:59", "America/Anchorage", 61.2181, -149.9003,
     "placidus", ["north-america"]),
    ("sydney-2000", "Sydney, Australia", "2000-01-01", "00:00", "Australia/Sydney", -33.8688, 151.2093,
     "placidus", ["southern", "oceania"]),
    ("auckland-2070", "Auckland, New Zealand", "2070-01-01", "06:30", "Pacific/Auckland", -36.8485, 174.7633,
     "placidus", ["southern", "oceania"]),
    ("singapore-2055", "Singapore", "2055-08-09", "20:08", "Asia/Singapore", 1.3521, 103.8198, "placidus",
     ["asia"]),
    ("dubai-2099", "Dubai, UAE", "2099-09-09", "09:09", "Asia/Dubai", 25.2048, 55.2708, "placidus", ["asia"]),
    ("paris-2040-koch", "Paris, France", "2040-02-14", "16:20", "Europe/Paris", 48.8566, 2.3522, "koch",
     ["europe", "house-system"]),
    ("moscow-2023-mercury-retrograde", "Moscow, Russia", "2023-04-25", "12:00", "Europe/Moscow", 55.7558,
     37.6173, "placidus", ["europe", "retrograde"]),
    # Inside the polar circles: Placidus and Koch are undefined, Porphyry is used.
    ("tromso-2010-polar", "Tromso, Norway", "2010-12-21", "12:00", "Europe/Oslo", 69.6492, 18.9553, "placidus",
     ["polar", "europe"]),
    ("mcmurdo-1998-polar-koch", "McMurdo Station, Antarctica", "1998-07-01", "18:00", "Antarctica/McMurdo",
     -77.8419, 166.6863, "koch", ["polar", "southern", "antarctica"]),
]


def tzdata_version():
    try:
        with open(TZDATA_ZI) as file:
            for line in file:
                match = re.match(r"#\s*version\s+(\S+)", line)
                if match:
                    return match.group(1)
                if not line.startswith("#"):
                    break
    except OSError:
        pass
    return "unknown"


def resolve_local(case_id, date, time, zone_name):
    """The UTC instant of a local wall time; exits when the time is in a gap or an overlap."""
    zone = zoneinfo.ZoneInfo(zone_name)
    year, month, day = (int(part) for part in date.split("-"))
    hour, minute = (int(part) for part in time.split(":"))
    local = [dt.datetime(year, month, day, hour, minute, fold=fold, tzinfo=zone) for fold in (0, 1)]
    offsets = [value.utcoffset() for value in local]
    if offsets[0] != offsets[1]:
        sys.exit(f"{case_id}: {date} {time} is in a DST gap or overlap in {zone_name}; pick another time")
    utc = local[0].astimezone(dt.timezone.utc)
    back = utc.astimezone(zone)
    if (back.year, back.month, back.day, back.hour, back.minute) != (year, month, day, hour, minute):
        sys.exit(f"{case_id}: {date} {time} does not exist in {zone_name}")
    return utc, offsets[0]


def format_offset(offset):
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    text = f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"
    return text + (f":{seconds % 60:02d}" if seconds % 60 else "")


def julian_day(utc):
    hour = utc.hour + utc.minute / 60 + utc.second / 3600
    return swe.julday(utc.year, utc.month, utc.day, hour, swe.GREG_CAL)


def house_of(longitude, cusps):
    """The house i (1..12) with cusp i <= longitude < cusp i+1, going round at 360 degrees."""
    found = []
    for index in range(12):
        start, end = cusps[index], cusps[(index + 1) % 12]
        if start < end:
            inside = start <= longitude < end
        elif start > end:  # the house contains 0 degrees
            inside = longitude >= start or longitude < end
        else:
            inside = False
        if inside:
            found.append(index + 1)
    if len(found) != 1:
        sys.exit(f"longitude {longitude} is in houses {found} of cusps {cusps}")
    return found[0]


def arc(a, b):
    """The smaller angle between two longitudes, in [0, 180]."""
    difference = abs(a - b) % 360.0
    return 360.0 - difference if difference > 180.0 else difference


def find_aspect(case_id, first, second):
    separation = arc(first["longitude"], second["longitude"])
    matches = []
    for name, angle, max_orb in ASPECTS:
        orb = abs(separation - angle)
        if abs(orb - max_orb) <= ORB_LIMIT_GUARD:
            sys.exit(f"{case_id}: {first['name']}-{second['name']} {name} orb {orb} is at its limit; pick another "
                     "time")
        if orb <= max_orb:
            matches.append((orb, name, angle))
    if not matches:
        return None
    orb, name, angle = min(matches)
    relative_speed = second["speed"] - first["speed"]
    if orb <= abs(relative_speed) * DT:
        sys.exit(f"{case_id}: {first['name']}-{second['name']} {name} is exact within DT; pick another time")
    later = arc(first["longitude"] + first["speed"] * DT, second["longitude"] + second["speed"] * DT)
    later_orb = abs(later - angle)
    return {
        "planet1": first["name"],
        "planet2": second["name"],
        "type": name,
        "orb": orb,
        "isApplying": later_orb < orb,
    }


def chart(case_id, location, date, time, zone_name, lat, lon, system, tags, description=None):
    utc, offset = resolve_local(case_id, date, time, zone_name)
    jd = julian_day(utc)

    used = system
    try:
        cusps, ascmc = swe.houses_ex(jd, lat, lon, HOUSE_LETTERS[system])
    except swe.Error:
        if system not in ("placidus", "koch"):
            raise
        # libswe returns ERR inside the polar circles and fills in Porphyry cusps.
        used = "porphyry"
        cusps, ascmc = swe.houses_ex(jd, lat, lon, HOUSE_LETTERS[used])
    if ("polar" in tags) != (used != system):
        sys.exit(f"{case_id}: house system {system} gave {used} at latitude {lat}")
    cusps = list(cusps[:12])

    planets = []
    for name, number in PLANETS:
        xx, retflag = swe.calc_ut(jd, number, FLAGS)
        if not retflag & swe.FLG_SWIEPH:
            sys.exit(f"{case_id}: {name} was not computed from the Swiss Ephemeris files (retflag {retflag})")
        longitude = xx[0]
        if not 0.0 <= longitude < 360.0:
            sys.exit(f"{case_id}: {name} longitude {longitude} is outside [0, 360)")
        nearest_cusp = min(arc(longitude, cusp) for cusp in cusps)
        if nearest_cusp <= CUSP_GUARD:
            sys.exit(f"{case_id}: {name} is {nearest_cusp} degree from a cusp; pick another time")
        planets.append({
            "name": name,
            "longitude": longitude,
            "latitude": xx[1],
            "speed": xx[3],
            "sign": SIGNS[math.floor(longitude / 30.0)],
            "house": house_of(longitude, cusps),
            "isRetrograde": xx[3] < 0,
        })

    aspects = []
    for index, first in enumerate(planets):
        for second in planets[index + 1:]:
            aspect = find_aspect(case_id, first, second)
            if aspect is not None:
                aspects.append(aspect)

    if any(p["isRetrograde"] for p in planets) and "retrograde" not in tags:
        tags = tags + ["retrograde"]
    return {
        "id": case_id,
        "description": description or f"{location}, {date} {time} {zone_name} ({format_offset(offset)})",
        "tags": tags,
        "input": {
            "name": "Reference",
            "birthDate": date,
            "birthTime": time,
            "timezone": zone_name,
            "latitude": lat,
            "longitude": lon,
            "locationName": location,
            "houseSystem": system,
        },
        "expected": {
            "utc": utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "utcSecondsSince1970": int((utc - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds()),
            "utcOffset": format_offset(offset),
            "julianDayUT": jd,
            "houseSystem": used,
            "houseSystemRequested": system if used != system else None,
            "warningCodes": ["house-system-fallback"] if used != system else [],
            "planets": planets,
            "houses": [{"number": i + 1, "cusp": cusp, "sign": SIGNS[math.floor(cusp / 30.0)]}
                       for i, cusp in enumerate(cusps)],
            "ascendant": ascmc[0],
            "midheaven": ascmc[1],
            "aspects": aspects,
        },
    }


def longitude_at(body, utc):
    return swe.calc_ut(julian_day(utc), body, FLAGS)[0][0]


def crossing(body, boundary, start, end):
    """The UTC instant (to the second) when `body` passes `boundary` between start and end, by bisection."""
    def past(instant):
        return (longitude_at(body, instant) - boundary) % 360.0 < 180.0

    if past(start) or not past(end):
        sys.exit(f"no crossing of {boundary} by body {body} between {start} and {end}")
    while end - start > dt.timedelta(seconds=1):
        middle = start + (end - start) / 2
        middle = middle.replace(microsecond=0)
        if middle <= start:
            break
        if past(middle):
            end = middle
        else:
            start = middle
    return end


def sign_boundary_case(case_id, location, zone_name, lat, lon, body_name, boundary, start_utc, end_utc, side):
    """A case at the whole local minute nearest a sign ingress on `side` ('before' or 'after') of it."""
    body = dict(PLANETS)[body_name]
    ingress = crossing(body, boundary, start_utc, end_utc)
    zone = zoneinfo.ZoneInfo(zone_name)
    local = ingress.astimezone(zone).replace(second=0, microsecond=0, tzinfo=None)
    if side == "after":
        local += dt.timedelta(minutes=1)
    date, time = local.strftime("%Y-%m-%d"), local.strftime("%H:%M")
    case = chart(case_id, location, date, time, zone_name, lat, lon, "placidus", ["sign-boundary"])
    planet = next(p for p in case["expected"]["planets"] if p["name"] == body_name)
    distance = arc(planet["longitude"], boundary)
    is_after = (planet["longitude"] - boundary) % 360.0 < 180.0
    if distance >= 0.01 or is_after != (side == "after"):
        sys.exit(f"{case_id}: {body_name} at {planet['longitude']} is not just {side} {boundary}")
    case["description"] += f"; {body_name} {distance:.6f} degree {side} {boundary:g} (ingress {ingress.isoformat()})"
    case["signBoundary"] = {"planet": body_name, "boundary": boundary, "side": side, "distance": distance}
    return case


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--ephe-path", default=os.environ.get("SE_EPHE_PATH") or "/usr/share/libswe/ephe")
    parser.add_argument("--output",
                        default=os.path.join(root, "Tests", "ChartEngineTests", "Fixtures", "natal_reference.json"))
    args = parser.parse_args()

    swe.set_ephe_path(args.ephe_path)
    if swe.version != "2.10.03":
        sys.exit(f"expected Swiss Ephemeris 2.10.03 (pyswisseph {PYSWISSEPH_VERSION}), found {swe.version}")
    if zoneinfo.TZPATH and not any(os.path.isdir(path) for path in zoneinfo.TZPATH):
        sys.exit(f"no system time zone database in {zoneinfo.TZPATH}")

    cases = [chart(*case) for case in CASES]
    utc = dt.timezone.utc
    cases.append(sign_boundary_case(
        "london-2024-sun-before-aries", "London, UK", "Europe/London", 51.5072, -0.1276, "Sun", 0.0,
        dt.datetime(2024, 3, 19, tzinfo=utc), dt.datetime(2024, 3, 21, tzinfo=utc), "before"))
    cases.append(sign_boundary_case(
        "tokyo-2031-sun-after-cancer", "Tokyo, Japan", "Asia/Tokyo", 35.6762, 139.6503, "Sun", 90.0,
        dt.datetime(2031, 6, 20, tzinfo=utc), dt.datetime(2031, 6, 23, tzinfo=utc), "after"))
    cases.append(sign_boundary_case(
        "santiago-1988-moon-after-leo", "Santiago, Chile", "America/Santiago", -33.4489, -70.6693, "Moon", 120.0,
        dt.datetime(1988, 8, 10, tzinfo=utc), dt.datetime(1988, 8, 11, 12, tzinfo=utc), "after"))

    ids = [case["id"] for case in cases]
    if len(set(ids)) != len(ids):
        sys.exit("duplicate case ids")
    retro = [case["id"] for case in cases
             if any(p["isRetrograde"] and p["name"] == "Mercury" for p in case["expected"]["planets"])]
    if "moscow-2023-mercury-retrograde" not in retro:
        sys.exit("the retrograde case has no retrograde Mercury")

    tz_version = tzdata_version()
    tz_path = next((path for path in zoneinfo.TZPATH if os.path.isdir(path)), "?")
    document = {
        "source": (
            "Generated by scripts/reference/generate_natal_charts.py with pyswisseph "
            f"{PYSWISSEPH_VERSION} (Swiss Ephemeris {swe.version}) and the data files sepl_18/semo_18 from "
            f"Debian swe-standard-data ({args.ephe_path}); local times resolved with Python "
            f"{sys.version.split()[0]} zoneinfo on the system tz database ({tz_path}, tzdata {tz_version}). "
            "julianDayUT = swe_julday of the UTC date and time; planets by swe_calc_ut with "
            "SEFLG_SWIEPH|SEFLG_SPEED; houses by swe_houses_ex (Porphyry when Placidus/Koch fail in the polar "
            "circles); sign = floor(lon/30); house = cusp i <= lon < cusp i+1 wrapping at 360; retrograde = "
            "speed < 0; aspects for the 45 pairs in Sun..Pluto order (planet1 the earlier), separation in "
            "[0, 180], orbs Conjunction 8 / Sextile 6 / Square 7 / Trine 7 / Opposition 8 (limit included), "
            f"isApplying = the orb {DT:g} day later (longitudes moved by speed * dt) is smaller than now."
        ),
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pyswissephVersion": PYSWISSEPH_VERSION,
        "swissEphemerisVersion": swe.version,
        "tzdataVersion": tz_version,
        "ephePath": args.ephe_path,
        "applyingTimeStepDays": DT,
        "caseCount": len(cases),
        "cases": cases,
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as output:
        json.dump(document, output, indent=1)
        output.write("\n")
    print(f"wrote {len(cases)} cases to {args.output}")


if __name__ == "__main__":
    main()
