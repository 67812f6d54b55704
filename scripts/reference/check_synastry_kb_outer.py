#!/usr/bin/env python3
"""Checks W2's synastry knowledge-base files (pairs whose first point is Mars..MC).

Usage: check_synastry_kb_outer.py [--partial] [en_file] [uk_file]

Checks: valid UTF-8 JSON; exactly the expected pair keys in the spec's order
(with --partial, a prefix of that order is accepted, so half-written files can be
committed); five aspects per pair in the spec's order; text is one line of 35-80
words; English uses no possessive/gendered pronouns (the heading names the
owners, so the text must read either way round); Ukrainian has no Latin letters
and only the ASCII apostrophe; weight 0.1-1.0; areas contain "relationships" and
only ReportArea values. Exits 1 on any problem. Standard library only.
"""
import json
import re
import sys
from collections import OrderedDict

POINTS = ["Sun", "Moon", "Mercury", "Venus", "Mars", "Jupiter", "Saturn",
          "Uranus", "Neptune", "Pluto", "ASC", "MC"]
FIRSTS = POINTS[4:]
ASPECTS = ["Conjunction", "Sextile", "Square", "Trine", "Opposition"]
AREAS = {"general", "finances", "career", "relationships", "health"}
EN_BANNED = re.compile(r"\b(your|yours|their|theirs|his|her|hers|he|she|him)\b", re.I)
UK_APOSTROPHES = re.compile(r"[\u2019\u02bc\u2018`\u00b4]")
LATIN = re.compile(r"[A-Za-z]")


def expected_keys():
    keys = []
    for i, first in enumerate(POINTS):
        if first not in FIRSTS:
            continue
        for second in POINTS[i:]:
            keys.append(f"{first}-{second}")
    return keys


def check(path, lang, partial):
    problems = []
    with open(path, "rb") as f:
        raw = f.read()
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=OrderedDict)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"{path}: invalid JSON/UTF-8: {e}"], 0, []
    expected = expected_keys()
    keys = list(data.keys())
    if partial:
        if keys != expected[:len(keys)]:
            problems.append(f"{path}: keys are not a prefix of the expected order")
    elif keys != expected:
        missing = [k for k in expected if k not in data]
        extra = [k for k in keys if k not in expected]
        problems.append(f"{path}: key set/order differs; missing={missing[:5]} extra={extra[:5]}")
    counts = []
    texts = {}
    for pair, aspects in data.items():
        if list(aspects.keys()) != ASPECTS:
            problems.append(f"{pair}: aspects {list(aspects.keys())} != {ASPECTS}")
            continue
        for aspect, entry in aspects.items():
            where = f"{pair}/{aspect}"
            if set(entry.keys()) != {"text", "areas", "weight"}:
                problems.append(f"{where}: fields {sorted(entry.keys())}")
                continue
            text, areas, weight = entry["text"], entry["areas"], entry["weight"]
            if not isinstance(text, str) or "\n" in text or text != text.strip():
                problems.append(f"{where}: text must be one trimmed line")
                continue
            n = len(text.split())
            counts.append(n)
            if not 35 <= n <= 80:
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
                    problems.append(f"{where}: Latin letter in '{text[max(0, m.start()-15):m.start()+15]}'")
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
    return problems, len(data), counts


def main(argv):
    partial = "--partial" in argv
    args = [a for a in argv if a != "--partial"]
    base = "Sources/Reports/Resources/KnowledgeBase"
    en = args[0] if len(args) > 0 else f"{base}/en/synastry-outer.json"
    uk = args[1] if len(args) > 1 else f"{base}/uk/synastry-outer.json"
    failed = False
    for path, lang in ((en, "en"), (uk, "uk")):
        problems, pairs, counts = check(path, lang, partial)
        for p in problems:
            print("PROBLEM", p)
        failed |= bool(problems)
        if counts:
            print(f"{path}: {pairs} pairs, {len(counts)} entries (expected {len(expected_keys())} pairs, "
                  f"{5 * len(expected_keys())} entries); words min {min(counts)} "
                  f"max {max(counts)} mean {sum(counts) / len(counts):.1f} total {sum(counts)}; "
                  f"problems {len(problems)}")
        else:
            print(f"{path}: {pairs} pairs, 0 entries; problems {len(problems)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
