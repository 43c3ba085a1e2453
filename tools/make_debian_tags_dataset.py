#!/usr/bin/python3
"""Builds a multi-label text corpus from the Debian package lists: each package's description with its debtags
(the Tag field of `apt-cache dumpavail`: role::program, interface::commandline, implemented-in::python, ...).

    tags,text
    interface::commandline;role::program;implemented-in::c,tool to convert image formats ...

Rules: packages with a Tag field and a description (one row per package name, its first stanza); the text is
the description with the package's and its source's names removed (tools/debian_packages.py's rules, shared with
make_debian_sections_dataset.py; long descriptions from Translation-en where apt keeps them); only the --tags most frequent tags are kept (rarer
ones dropped from every row) and rows left without a tag are dropped; at most --max-packages packages, drawn with
a fixed seed; split into train.csv and validation.csv by a hash of the package name. Tags are separated by ';'
(the project's dataset.label_separator). Standard library only; run with /usr/bin/python3:

    /usr/bin/python3 tools/make_debian_tags_dataset.py [--out examples/data/debian_tags]
"""

import argparse
import collections
import csv
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debian_packages  # noqa: E402  (the package lists, the long descriptions, the name rules, the split)


def tags_of(stanza):
    return sorted({t.strip() for t in stanza.get("Tag", "").replace("\n", " ").split(",") if t.strip()})


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.normpath(os.path.join(here, "..", "examples", "data", "debian_tags")))
    ap.add_argument("--tags", type=int, default=16, help="the N most frequent tags (default 16)")
    ap.add_argument("--max-packages", type=int, default=12000)
    ap.add_argument("--validation-percent", type=int, default=20)
    ap.add_argument("--dumpavail", help="read this file instead of running apt-cache dumpavail (tests)")
    ap.add_argument("--translations", nargs="*", help="Translation-en files (default: those in /var/lib/apt/lists)")
    ap.add_argument("--seed", type=int, default=42)
    a = ap.parse_args()

    avail = debian_packages.read_avail(a.dumpavail)
    long_text, _ = debian_packages.long_texts(a.translations)
    packages = {name: (tags_of(stanza), text)
                for name, stanza, text in debian_packages.package_texts(avail, long_text, tags_of)}
    if not packages:
        sys.exit("no package with a Tag field and a description found")
    counts = collections.Counter(t for tags, _ in packages.values() for t in tags)
    kept = {t for t, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:a.tags]}
    names = sorted(n for n in packages if kept.intersection(packages[n][0]))
    random.Random(a.seed).shuffle(names)
    names = sorted(names[:a.max_packages])
    rows = {"train": [], "validation": []}
    for name in names:
        tags, text = packages[name]
        split = "validation" if debian_packages.in_validation(name, a.validation_percent) else "train"
        rows[split].append((";".join(t for t in tags if t in kept), text))
    os.makedirs(a.out, exist_ok=True)
    for split, data in rows.items():
        with open(os.path.join(a.out, split + ".csv"), "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["tags", "text"])
            w.writerows(data)
    print("%d tagged packages; the %d most frequent tags (%s); %d train, %d validation rows in %s" % (
        len(packages), len(kept), ", ".join(sorted(kept)), len(rows["train"]), len(rows["validation"]), a.out),
        file=sys.stderr)


if __name__ == "__main__":
    main()
