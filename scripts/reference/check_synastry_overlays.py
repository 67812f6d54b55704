#!/usr/bin/env python3
"""Checks the synastry house-overlay knowledge-base files (synastry-overlays.json).

Usage: check_synastry_overlays.py [--partial] [en_file] [uk_file]

Checks: valid UTF-8 JSON in the canonical 2-space layout; exactly the ten planets
(AstroDomain PlanetName raw values, Sun..Pluto) in that order, each with houses
"1".."12" in order (with --partial, a prefix of the planet order is accepted, so
half-written files can be committed); each entry is {"text", "areas", "weight"};
text is one trimmed line of 30-70 words, not repeated elsewhere; English uses no
possessive/gendered pronouns (the report's heading names the owners, so the text
must read either way round); Ukrainian has no Latin letters, only the ASCII
apostrophe and no straight double quotes; weight 0.1-1.0; areas contain
"relationships" and only ReportArea values. Also compares the two languages:
same weights and area sets for every entry. Exits 1 on any problem. Standard
library only.
"""
import json
import re
import sys
from collections import OrderedDict

PLANETS = ["Sun", "Moon", "Mercury", "Venus", "Mars", "Jupiter", "Saturn",
           "Uranus", "Neptune", "Pluto"]
HOUSES = [str(h) for h in range(1, 13)]
AREAS = {"general", "finances", "career", "relationships", "health"}
EN_BANNED = re.compile(r"\b(your|yours|their|theirs|his|her|hers|he|she|him)\b", re.I)
UK_APOSTROPHES = re.compile(r"[\u2019\u02bc\u2018`\u00b4]")
LATIN = re.compile(r"[A-Za-z]")
MIN_WORDS, MAX_WORDS = 30, 70


def check(path, lang, partial):
    problems = []
    with open(path, "rb") as f:
        raw = f.read()
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=OrderedDict)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"{path}: invalid JSON/UTF-8: {e}"], None, []
    keys = list(data.keys())
    if partial:
        if keys != PLANETS[:len(keys)]:
            problems.append(f"{path}: planets {keys} are not a prefix of {PLANETS}")
    elif keys != PLANETS:
        missing = [k for k in PLANETS if k not in data]
        extra = [k for k in keys if k not in PLANETS]
        problems.append(f"{path}: planet set/order differs; missing={missing} extra={extra}")
    counts = []
    texts = {}
    for planet, houses in data.items():
        if not isinstance(houses, dict) or list(houses.keys()) != HOUSES:
            problems.append(f"{planet}: houses {list(houses.keys()) if isinstance(houses, dict) else houses!r}"
                            f" != {HOUSES}")
            continue
        for house, entry in houses.items():
            where = f"{planet}/{house}"
            if not isinstance(entry, dict) or set(entry.keys()) != {"text", "areas", "weight"}:
                problems.append(f"{where}: fields {sorted(entry.keys()) if isinstance(entry, dict) else entry!r}")
                continue
            text, areas, weight = entry["text"], entry["areas"], entry["weight"]
            if not isinstance(text, str) or "\n" in text or text != text.strip():
                problems.append(f"{where}: text must be one trimmed line")
                continue
            n = len(text.split())
            counts.append(n)
            if not MIN_WORDS <= n <= MAX_WORDS:
                problems.append(f"{where}: {n} words")
            if text in texts:
                problems.append(f"{where}: same text as {texts[text]}")
            texts[text] = where
            if "  " in text:
                problems.append(f"{where}: double space")
            if lang == "en":
                m = EN_BANNED.search(text)
                if m:
                    problems.append(f"{where}: pronoun '{m.group(0)}'")
            else:
                m = LATIN.search(text)
                if m:
                    problems.append(f"{where}: Latin letter in '{text[max(0, m.start() - 15):m.start() + 15]}'")
                if UK_APOSTROPHES.search(text):
                    problems.append(f"{where}: non-ASCII apostrophe")
                if '"' in text:
                    problems.append(f"{where}: use «…» quotes")
            if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0.1 <= weight <= 1.0:
                problems.append(f"{where}: weight {weight!r}")
            if not isinstance(areas, list) or "relationships" not in areas \
                    or not set(areas) <= AREAS or len(set(areas)) != len(areas):
                problems.append(f"{where}: areas {areas!r}")
    if raw.decode("utf-8") != json.dumps(data, indent=2, ensure_ascii=False) + "\n":
        problems.append(f"{path}: not in canonical 2-space layout")
    return problems, data, counts


def compare(en, uk):
    problems = []
    for planet in PLANETS:
        for house in HOUSES:
            a = en.get(planet, {}).get(house)
            b = uk.get(planet, {}).get(house)
            if not isinstance(a, dict) or not isinstance(b, dict):
                continue
            if a.get("weight") != b.get("weight"):
                problems.append(f"{planet}/{house}: weight en {a.get('weight')} uk {b.get('weight')}")
            if set(a.get("areas", [])) != set(b.get("areas", [])):
                problems.append(f"{planet}/{house}: areas en {a.get('areas')} uk {b.get('areas')}")
    return problems


def main(argv):
    partial = "--partial" in argv
    args = [a for a in argv if a != "--partial"]
    base = "Sources/Reports/Resources/KnowledgeBase"
    en = args[0] if len(args) > 0 else f"{base}/en/synastry-overlays.json"
    uk = args[1] if len(args) > 1 else f"{base}/uk/synastry-overlays.json"
    failed = False
    loaded = {}
    for path, lang in ((en, "en"), (uk, "uk")):
        problems, data, counts = check(path, lang, partial)
        loaded[lang] = data
        for p in problems:
            print("PROBLEM", p)
        failed |= bool(problems)
        planets = len(data) if data is not None else 0
        if counts:
            print(f"{path}: {planets} planets, {len(counts)} entries (expected {len(PLANETS)} planets, "
                  f"{len(PLANETS) * len(HOUSES)} entries); words min {min(counts)} "
                  f"max {max(counts)} mean {sum(counts) / len(counts):.1f} total {sum(counts)}; "
                  f"problems {len(problems)}")
        else:
            print(f"{path}: {planets} planets, 0 entries; problems {len(problems)}")
    if loaded["en"] is not None and loaded["uk"] is not None:
        problems = compare(loaded["en"], loaded["uk"])
        for p in problems:
            print("PROBLEM", p)
        print(f"en/uk agreement (weights, areas): problems {len(problems)}")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
