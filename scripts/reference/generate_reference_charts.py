#!/usr/bin/env python3
"""Generates Tests/EphemerisTests/Fixtures/reference_charts.json: golden charts for the Ephemeris tests.

Independent of the Swift code: computed with pyswisseph (the Python binding of the Swiss Ephemeris, which
bundles its own copy of the C library) reading the same data files as Debian's libswe.

    pip install pyswisseph==2.10.3.2
    python3 scripts/reference/generate_reference_charts.py            # from the package root

Options: --ephe-path DIR (default: $SE_EPHE_PATH or /usr/share/libswe/ephe), --output FILE.
"""

import argparse
import datetime as dt
import json
import os
import sys

import swisseph as swe

PYSWISSEPH_VERSION = "2.10.3.2"

# Body name (as in the Swift CelestialBody raw values) -> libswe body number.
BODIES = [
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
    ("MeanNode", swe.MEAN_NODE),
    ("TrueNode", swe.TRUE_NODE),
    ("Chiron", swe.CHIRON),
    ("MeanLilith", swe.MEAN_APOG),
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
AYANAMSAS = {"lahiri": swe.SIDM_LAHIRI, "faganBradley": swe.SIDM_FAGAN_BRADLEY, "raman": swe.SIDM_RAMAN}

# (id, place, local time with its UTC offset, latitude, longitude, house system, ayanamsa or None, tags)
PLACES = [
    ("greenwich-1900-start", "Greenwich, UK", "1900-01-01T00:00:00+00:00", 51.4769, -0.0005, "placidus", None,
     ["edge-date"]),
    ("wellington-2100-end", "Wellington, New Zealand", "2101-01-01T12:59:00+13:00", -41.2866, 174.7756,
     "placidus", None, ["edge-date", "southern"]),
    ("kyiv-leap-day-2000", "Kyiv, Ukraine", "2000-02-29T10:15:00+02:00", 50.4501, 30.5234, "placidus", None,
     ["leap-day"]),
    ("kathmandu-1987", "Kathmandu, Nepal", "1987-04-12T06:20:00+05:45", 27.7172, 85.3240, "placidus", None,
     ["odd-offset"]),
    ("st-johns-1962", "St. John's, Canada", "1962-01-20T03:40:00-03:30", 47.5615, -52.7126, "placidus", None,
     ["odd-offset"]),
    ("kiritimati-2016", "Kiritimati, Kiribati", "2016-07-04T18:00:00+14:00", 1.8721, -157.4278, "placidus", None,
     ["odd-offset"]),
    ("adelaide-1975", "Adelaide, Australia", "1975-11-11T21:05:00+09:30", -34.9285, 138.6007, "placidus", None,
     ["odd-offset", "southern"]),
    ("honolulu-1999", "Honolulu, USA", "1999-08-11T05:00:00-10:00", 21.3069, -157.8583, "placidus", None, []),
    ("darwin-1950", "Darwin, Australia", "1950-03-03T03:33:00+09:30", -12.4634, 130.8456, "koch", None,
     ["odd-offset", "southern"]),
    ("marquesas-2030", "Taiohae, Marquesas", "2030-09-09T09:09:00-09:30", -8.9110, -140.0990, "placidus", None,
     ["odd-offset", "southern"]),
    ("chatham-2045", "Waitangi, Chatham Islands", "2045-05-05T23:45:00+12:45", -43.9535, -176.5597, "placidus",
     None, ["odd-offset", "southern"]),
    ("tehran-1979", "Tehran, Iran", "1979-02-11T14:00:00+03:30", 35.6892, 51.3890, "placidus", None,
     ["odd-offset"]),
    ("kabul-2001", "Kabul, Afghanistan", "2001-11-13T08:00:00+04:30", 34.5553, 69.2075, "placidus", None,
     ["odd-offset"]),
    ("mumbai-1947", "Mumbai, India", "1947-08-15T00:00:00+05:30", 19.0760, 72.8777, "placidus", None,
     ["odd-offset"]),
    ("yangon-1962", "Yangon, Myanmar", "1962-03-02T08:50:00+06:30", 16.8409, 96.1735, "placidus", None,
     ["odd-offset"]),
    ("tokyo-1923", "Tokyo, Japan", "1923-09-01T11:58:00+09:00", 35.6762, 139.6503, "placidus", None, []),
    ("beijing-1949", "Beijing, China", "1949-10-01T15:00:00+08:00", 39.9042, 116.4074, "placidus", None, []),
    ("jakarta-1945", "Jakarta, Indonesia", "1945-08-17T10:00:00+07:00", -6.2088, 106.8456, "placidus", None,
     ["southern"]),
    ("sydney-2000", "Sydney, Australia", "2000-01-01T00:00:00+11:00", -33.8688, 151.2093, "placidus", None,
     ["southern"]),
    ("auckland-2070", "Auckland, New Zealand", "2070-01-01T06:30:00+13:00", -36.8485, 174.7633, "placidus", None,
     ["southern"]),
    ("cape-town-1994", "Cape Town, South Africa", "1994-04-27T07:00:00+02:00", -33.9249, 18.4241, "placidus",
     None, ["southern"]),
    ("nairobi-1963", "Nairobi, Kenya", "1963-12-12T00:00:00+03:00", -1.2921, 36.8219, "placidus", None,
     ["southern"]),
    ("lagos-1960", "Lagos, Nigeria", "1960-10-01T00:00:00+01:00", 6.5244, 3.3792, "placidus", None, []),
    ("cairo-1922", "Cairo, Egypt", "1922-11-04T17:30:00+02:00", 30.0444, 31.2357, "placidus", None, []),
    ("london-1966", "London, UK", "1966-07-30T16:45:00+01:00", 51.5072, -0.1276, "placidus", None, []),
    ("new-york-1929", "New York, USA", "1929-10-29T09:30:00-05:00", 40.7128, -74.0060, "placidus", None, []),
    ("mexico-city-1985", "Mexico City, Mexico", "1985-09-19T07:17:00-06:00", 19.4326, -99.1332, "placidus", None,
     []),
    ("lima-2080", "Lima, Peru", "2080-06-21T12:00:00-05:00", -12.0464, -77.0428, "placidus", None, ["southern"]),
    ("sao-paulo-1910", "Sao Paulo, Brazil", "1910-05-18T22:10:00-03:00", -23.5505, -46.6333, "placidus", None,
     ["southern"]),
    ("santiago-2060", "Santiago, Chile", "2060-02-14T20:20:00-04:00", -33.4489, -70.6693, "placidus", None,
     ["southern"]),
    ("anchorage-2090", "Anchorage, USA", "2090-10-31T23:59:00-09:00", 61.2181, -149.9003, "placidus", None, []),
    ("dateline-east", "Equator at 180 E", "2025-03-20T12:00:00+12:00", 0.0, 180.0, "placidus", None,
     ["edge-place"]),
    ("dateline-west", "Equator at 180 W", "2025-03-20T12:00:00-12:00", 0.0, -180.0, "placidus", None,
     ["edge-place"]),
    ("moscow-mercury-retrograde", "Moscow, Russia", "2023-04-25T12:00:00+03:00", 55.7558, 37.6173, "placidus",
     None, ["retrograde"]),
    # Inside the polar circles: Placidus and Koch are undefined, libswe switches to Porphyry.
    ("tromso-placidus", "Tromso, Norway", "2010-12-21T12:00:00+01:00", 69.6492, 18.9553, "placidus", None,
     ["polar"]),
    ("tromso-koch", "Tromso, Norway", "1985-06-21T23:30:00+02:00", 69.6492, 18.9553, "koch", None, ["polar"]),
    ("longyearbyen-koch", "Longyearbyen, Svalbard", "2035-01-15T04:00:00+01:00", 78.2232, 15.6267, "koch", None,
     ["polar"]),
    ("mcmurdo-placidus", "McMurdo Station, Antarctica", "1998-07-01T18:00:00+12:00", -77.8419, 166.6863,
     "placidus", None, ["polar", "southern"]),
    ("vostok-placidus", "Vostok Station, Antarctica", "2055-12-24T09:00:00+05:00", -78.4645, 106.8340,
     "placidus", None, ["polar", "southern"]),
    # Sidereal zodiacs.
    ("delhi-lahiri", "New Delhi, India", "1984-10-31T09:20:00+05:30", 28.6139, 77.2090, "placidus", "lahiri",
     ["sidereal"]),
    ("chennai-raman", "Chennai, India", "1969-07-20T20:17:00+00:00", 13.0827, 80.2707, "wholeSign", "raman",
     ["sidereal"]),
    ("los-angeles-fagan", "Los Angeles, USA", "1952-02-06T04:00:00-08:00", 34.0522, -118.2437, "equal",
     "faganBradley", ["sidereal"]),
    ("colombo-lahiri-2099", "Colombo, Sri Lanka", "2099-09-09T09:09:00+05:30", 6.9271, 79.8612, "koch", "lahiri",
     ["sidereal"]),
    ("tromso-lahiri-polar", "Tromso, Norway", "2010-12-21T12:00:00+01:00", 69.6492, 18.9553, "placidus", "lahiri",
     ["sidereal", "polar"]),
]
# Every house system for a few places (the first entry of each is already above with Placidus).
ALL_SYSTEMS_PLACES = ["kathmandu-1987", "buenos-aires-1978", "reykjavik-2024"]
EXTRA_PLACES = {
    "buenos-aires-1978": ("Buenos Aires, Argentina", "1978-06-25T15:00:00-03:00", -34.6037, -58.3816, ["southern"]),
    "reykjavik-2024": ("Reykjavik, Iceland", "2024-04-08T18:00:00+00:00", 64.1466, -21.9426, []),
}

FLAGS = swe.FLG_SWIEPH | swe.FLG_SPEED


def utc_parts(utc):
    hour = utc.hour + utc.minute / 60 + utc.second / 3600
    return utc.year, utc.month, utc.day, hour


def chart(case_id, place, local_iso, utc, lat, lon, system, ayanamsa, tags, description=None):
    year, month, day, hour = utc_parts(utc)
    jd = swe.julday(year, month, day, hour, swe.GREG_CAL)
    flags = FLAGS
    house_flags = 0
    if ayanamsa is not None:
        swe.set_sid_mode(AYANAMSAS[ayanamsa], 0, 0)
        flags |= swe.FLG_SIDEREAL
        house_flags = swe.FLG_SIDEREAL
    else:
        swe.set_sid_mode(swe.SIDM_FAGAN_BRADLEY, 0, 0)  # the library default
    bodies = []
    for name, number in BODIES:
        xx, retflag = swe.calc_ut(jd, number, flags)
        if not retflag & swe.FLG_SWIEPH:
            sys.exit(f"{case_id}: {name} was not computed from the Swiss Ephemeris files (retflag {retflag})")
        bodies.append({
            "body": name,
            "longitude": xx[0],
            "latitude": xx[1],
            "distance": xx[2],
            "longitudeSpeed": xx[3],
            "latitudeSpeed": xx[4],
            "distanceSpeed": xx[5],
            "retflag": retflag,
        })
    used = system
    fallback_message = None
    try:
        cusps, ascmc, _, _ = swe.houses_ex2(jd, lat, lon, HOUSE_LETTERS[system], house_flags)
    except swe.Error as error:
        # libswe returned ERR; for Placidus/Koch in the polar circles it switched to Porphyry.
        message = str(error)
        if "Porphyry" not in message:
            raise
        fallback_message = message.split(": ", 1)[-1]
        used = "porphyry"
        cusps, ascmc, _, _ = swe.houses_ex2(jd, lat, lon, HOUSE_LETTERS[used], house_flags)
    if "polar" in tags and used == system:
        sys.exit(f"{case_id}: expected a Porphyry fallback at latitude {lat}")
    return {
        "id": case_id,
        "description": description or f"{place}, {local_iso}",
        "tags": tags,
        "input": {
            "local": local_iso,
            "utc": utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "year": year,
            "month": month,
            "day": day,
            "hour": hour,
            "julianDayUT": jd,
            "latitude": lat,
            "longitude": lon,
            "houseSystem": system,
            "zodiac": "sidereal" if ayanamsa else "tropical",
            "ayanamsa": ayanamsa,
        },
        "output": {
            "bodies": bodies,
            "houses": {
                "requested": system,
                "system": used,
                "fallbackMessage": fallback_message,
                "cusps": list(cusps[:12]),
                "ascendant": ascmc[0],
                "midheaven": ascmc[1],
                "armc": ascmc[2],
                "vertex": ascmc[3],
            },
        },
    }


def sun_longitude(jd):
    return swe.calc_ut(jd, swe.SUN, FLAGS)[0][0]


def find_aries_ingress(year):
    """The Julian day (UT) of the March equinox of `year`, by bisection on the Sun's longitude."""
    low = swe.julday(year, 3, 15, 0.0)
    high = swe.julday(year, 3, 25, 0.0)
    for _ in range(60):
        middle = (low + high) / 2
        if sun_longitude(middle) > 180:  # still in Pisces (longitude just below 360)
            low = middle
        else:
            high = middle
    return high


def sign_boundary_cases():
    """Two whole-minute UTC instants with the Sun within 0.005 degrees of 0 Aries, one on each side."""
    ingress = find_aries_ingress(2024)
    y, m, d, h = swe.revjul(ingress)
    ingress_utc = dt.datetime(y, m, d, tzinfo=dt.timezone.utc) + dt.timedelta(hours=h)
    ingress_minute = ingress_utc.replace(second=0, microsecond=0)
    cases = []
    for side, delta in (("before", -3), ("after", 4)):
        utc = ingress_minute + dt.timedelta(minutes=delta)
        year, month, day, hour = utc_parts(utc)
        lon = sun_longitude(swe.julday(year, month, day, hour))
        distance = 360 - lon if lon > 180 else lon
        if distance >= 0.005 or (side == "before") != (lon > 180):
            sys.exit(f"sign boundary search failed: {utc} gives Sun at {lon}")
        local = utc.isoformat()
        case = chart(f"sun-aries-ingress-{side}", "Greenwich, UK", local, utc, 51.4769, -0.0005, "placidus", None,
                     ["sign-boundary"],
                     f"Sun {distance:.5f} deg {side} 0 Aries (equinox {ingress_utc.isoformat()})")
        case["signBoundary"] = {"body": "Sun", "boundary": 0.0, "side": side, "distance": distance}
        cases.append(case)
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--ephe-path", default=os.environ.get("SE_EPHE_PATH") or "/usr/share/libswe/ephe")
    parser.add_argument("--output",
                        default=os.path.join(root, "Tests", "EphemerisTests", "Fixtures", "reference_charts.json"))
    args = parser.parse_args()

    swe.set_ephe_path(args.ephe_path)
    if swe.version != "2.10.03":
        sys.exit(f"expected Swiss Ephemeris 2.10.03 (pyswisseph {PYSWISSEPH_VERSION}), found {swe.version}")

    cases = []
    by_id = {}
    for case_id, place, local_iso, lat, lon, system, ayanamsa, tags in PLACES:
        utc = dt.datetime.fromisoformat(local_iso).astimezone(dt.timezone.utc)
        by_id[case_id] = (place, local_iso, lat, lon, tags)
        cases.append(chart(case_id, place, local_iso, utc, lat, lon, system, ayanamsa, tags))
    for case_id, (place, local_iso, lat, lon, tags) in EXTRA_PLACES.items():
        by_id[case_id] = (place, local_iso, lat, lon, tags)
    for base in ALL_SYSTEMS_PLACES:
        place, local_iso, lat, lon, tags = by_id[base]
        utc = dt.datetime.fromisoformat(local_iso).astimezone(dt.timezone.utc)
        for system in HOUSE_LETTERS:
            if base in dict((p[0], p) for p in PLACES) and system == "placidus":
                continue  # already in the list above
            cases.append(chart(f"{base}-{system}", place, local_iso, utc, lat, lon, system, None,
                               tags + ["all-house-systems"]))
    cases.extend(sign_boundary_cases())

    if not any(b["longitudeSpeed"] < 0 and b["body"] == "Mercury"
               for c in cases if "retrograde" in c["tags"] for b in c["output"]["bodies"]):
        sys.exit("the retrograde case has no retrograde Mercury")
    for case in cases:
        if "retrograde" in case["tags"]:
            continue
        if any(b["longitudeSpeed"] < 0 for b in case["output"]["bodies"][:10]):
            case["tags"].append("retrograde")

    document = {
        "source": (
            "Generated by scripts/reference/generate_reference_charts.py with pyswisseph "
            f"{PYSWISSEPH_VERSION} (Swiss Ephemeris {swe.version}) and the data files sepl_18/semo_18/seas_18 "
            "from Debian swe-standard-data (/usr/share/libswe/ephe); flags SEFLG_SWIEPH|SEFLG_SPEED "
            "(+SEFLG_SIDEREAL for sidereal cases), houses by swe_houses_ex2, julianDayUT by swe_julday of the UTC "
            "instant."
        ),
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pyswissephVersion": PYSWISSEPH_VERSION,
        "swissEphemerisVersion": swe.version,
        "ephePath": args.ephe_path,
        "caseCount": len(cases),
        "cases": cases,
    }
    with open(args.output, "w") as output:
        json.dump(document, output, indent=1)
        output.write("\n")
    print(f"wrote {len(cases)} cases to {args.output}")


if __name__ == "__main__":
    main()
