#!/usr/bin/env python3
"""Checks a synastry knowledge-base file against the format in the synastry KB spec.

Usage: check_synastry_kb.py FILE [FILE ...] [--set personal|outer|all]
The language (en/uk) is taken from the parent folder name. Exits 1 on any problem.
Stdlib only, so it runs anywhere the repo is checked out.
"""
import json
import re
import sys
from collections import OrderedDict

POINTS = ["Sun", "Moon", "Mercury", "Venus", "Mars", "Jupiter", "Saturn",
          "Uranus", "Neptune", "Pluto", "ASC", "MC"]
ASPECTS = ["Conjunction", "Sextile", "Square", "Trine", "Opposition"]
AREAS = {"general", "finances", "career", "relationships", "health"}
FIRSTS = {"personal": range(0, 4), "outer": range(4, 12), "all": range(0, 12)}

# English: possessives tie a point to one partner, but the heading decides whose point is whose.
EN_BANNED = re.compile(r"\b(your|their|his|her|hers|he|she|him)\b", re.IGNORECASE)
# Ukrainian: a possessive right before a point name ("ваш Місяць") points at one partner.
UK_POINT = r"(Сонц|Місяц|Меркурі|Венер|Марс|Юпітер|Сатурн|Уран|Нептун|Плутон|Асцендент|Середин)"
UK_BANNED = re.compile(r"\b(ваш|ваша|ваше|вашого|вашої|вашому|вашій|вашим|вашу)\s+" + UK_POINT, re.IGNORECASE)
UK_START = re.compile(r"^(Ваш|Ваша|Ваше)\b")
RUSSIAN_LETTERS = re.compile(r"[ыэъёЫЭЪЁ]")
LATIN = re.compile(r"[A-Za-z]+")
UK_ALLOWED_LATIN = {"MC"}
BAD_APOSTROPHES = re.compile(r"[\u2019\u02bc\u2018`]")


def expected_keys(which):
    keys = []
    for i in FIRSTS[which]:
        for j in range(i, len(POINTS)):
            keys.append(f"{POINTS[i]}-{POINTS[j]}")
    return keys


def check(path, which):
    lang = path.replace("\\", "/").split("/")[-2]
    problems = []
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    try:
        data = json.loads(raw, object_pairs_hook=OrderedDict)
    except json.JSONDecodeError as e:
        return [f"invalid JSON: {e}"], {}
    keys = expected_keys(which)
    if list(data.keys()) != keys:
        missing = [k for k in keys if k not in data]
        extra = [k for k in data if k not in keys]
        problems.append(f"pair keys differ from spec order; missing={missing} extra={extra}")
    words = []
    openings = {}
    entries = 0
    for pair, aspects in data.items():
        if not isinstance(aspects, dict) or list(aspects.keys()) != ASPECTS:
            problems.append(f"{pair}: aspects must be exactly {ASPECTS} in order, got {list(aspects)}")
            continue
        for asp, entry in aspects.items():
            entries += 1
            where = f"{pair}/{asp}"
            if set(entry.keys()) != {"text", "areas", "weight"}:
                problems.append(f"{where}: fields {sorted(entry)}")
                continue
            text, areas, weight = entry["text"], entry["areas"], entry["weight"]
            if not isinstance(text, str) or "\n" in text or "\r" in text:
                problems.append(f"{where}: text must be one line of text")
                continue
            n = len(text.split())
            words.append(n)
            if not 35 <= n <= 80:
                problems.append(f"{where}: {n} words (35-80)")
            if text != text.strip() or "  " in text:
                problems.append(f"{where}: stray whitespace")
            if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0.1 <= weight <= 1.0:
                problems.append(f"{where}: weight {weight!r} outside 0.1-1.0")
            if not isinstance(areas, list) or "relationships" not in areas or not set(areas) <= AREAS \
                    or len(set(areas)) != len(areas):
                problems.append(f"{where}: areas {areas!r}")
            opening = " ".join(text.split()[:3]).lower()
            openings[opening] = openings.get(opening, 0) + 1
            if lang == "en":
                m = EN_BANNED.search(text)
                if m:
                    problems.append(f"{where}: one-partner pronoun {m.group(0)!r}")
            elif lang == "uk":
                latin = [w for w in LATIN.findall(text) if w not in UK_ALLOWED_LATIN]
                if latin:
                    problems.append(f"{where}: Latin letters {latin}")
                if RUSSIAN_LETTERS.search(text):
                    problems.append(f"{where}: Russian letters")
                if BAD_APOSTROPHES.search(text):
                    problems.append(f"{where}: use the ASCII apostrophe '")
                m = UK_BANNED.search(text) or UK_START.search(text)
                if m:
                    problems.append(f"{where}: one-partner possessive {m.group(0)!r}")
    stats = {
        "pairs": len(data),
        "entries": entries,
        "words_total": sum(words),
        "words_min": min(words) if words else 0,
        "words_max": max(words) if words else 0,
        "words_mean": round(sum(words) / len(words), 1) if words else 0,
        "most_repeated_opening": max(openings.items(), key=lambda kv: kv[1]) if openings else None,
    }
    return problems, stats


def main(argv):
    which = "personal"
    files = []
    it = iter(argv)
    for a in it:
        if a == "--set":
            which = next(it)
        else:
            files.append(a)
    if not files or which not in FIRSTS:
        print(__doc__)
        return 2
    failed = False
    for path in files:
        problems, stats = check(path, which)
        print(f"{path}: {stats}")
        for p in problems:
            print(f"  PROBLEM {p}")
        print(f"  {len(problems)} problem(s)")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
