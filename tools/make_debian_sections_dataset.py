#!/usr/bin/python3
"""Builds a text classification corpus that every Debian machine has: package descriptions labelled by
their archive section (games, libs, python, net, ...).

    label,text
    games,real-time strategy game of ancient warfare ...

Sources: `apt-cache dumpavail` (package, section, one-line description) and, where apt keeps them, the
long descriptions of the Translation-en files in /var/lib/apt/lists. Without those only the one-line
descriptions are used, and the tool says how to get the long ones:

    apt-get -o Acquire::Languages=en update

Rules: one row per package name (its first stanza); the section without its component ("contrib/games"
is games); the package's own name and its source package's name removed from the text (whole words, any
case), so the name cannot give the section away; the --sections largest sections, balanced to the same
number of packages each (the smallest of them, or --per-section), drawn with a fixed seed; split into
train.csv and validation.csv by a hash of the package name (the same package always lands in the same
split, whatever else changes). Standard library only; run with /usr/bin/python3:

    /usr/bin/python3 tools/make_debian_sections_dataset.py [--out examples/data/debian_sections]
"""

import argparse
import csv
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debian_packages  # noqa: E402  (the package lists, the long descriptions, the name rules, the split)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.normpath(os.path.join(here, "..", "examples", "data", "debian_sections")))
    ap.add_argument("--sections", type=int, default=12, help="the N largest sections (default 12)")
    ap.add_argument("--per-section", type=int, default=0, help="packages per section (0: the smallest section's)")
    ap.add_argument("--validation-percent", type=int, default=20)
    ap.add_argument("--dumpavail", help="read this file instead of running apt-cache dumpavail (tests)")
    ap.add_argument("--translations", nargs="*",
                    help="Translation-en files (default: those in /var/lib/apt/lists; none for a test)")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()

    avail = debian_packages.read_avail(a.dumpavail)
    long_text, translation_files = debian_packages.long_texts(a.translations)
    packages = {name: (stanza["Section"].split("/")[-1], text)  # the section without its component
                for name, stanza, text in debian_packages.package_texts(avail, long_text,
                                                                         lambda stanza: stanza.get("Section"))}
    if not packages:
        sys.exit("no package with a section and a description found")

    by_section = {}
    for name in sorted(packages):
        by_section.setdefault(packages[name][0], []).append(name)
    largest = sorted(by_section, key=lambda sec: (-len(by_section[sec]), sec))[:a.sections]
    per = min(len(by_section[sec]) for sec in largest)
    if a.per_section > 0:
        per = min(per, a.per_section)
    rng = random.Random(a.seed)
    rows = {"train": [], "validation": []}
    for sec in sorted(largest):
        names = sorted(by_section[sec])
        rng.shuffle(names)
        for name in sorted(names[:per]):
            split = "validation" if debian_packages.in_validation(name, a.validation_percent) else "train"
            rows[split].append((sec, packages[name][1]))
    os.makedirs(a.out, exist_ok=True)
    for split, data in rows.items():
        random.Random(a.seed + len(split)).shuffle(data)  # mixed classes, the same every run
        with open(os.path.join(a.out, split + ".csv"), "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["label", "text"])
            w.writerows(data)
    print("%d packages, %d sections of %d each (%s): %d train, %d validation rows in %s; %s" % (
        len(packages), len(largest), per, ", ".join(sorted(largest)), len(rows["train"]), len(rows["validation"]),
        a.out, "long descriptions from %d Translation-en file(s)" % translation_files if long_text else
        "one-line descriptions only (for the long ones: apt-get -o Acquire::Languages=en update)"),
        file=sys.stderr)


if __name__ == "__main__":
    main()
