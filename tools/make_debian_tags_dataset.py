#!/usr/bin/python3
"""Builds a multi-label text corpus from the Debian package lists: each package's description with its debtags
(the Tag field of `apt-cache dumpavail`: role::program, interface::commandline, implemented-in::python, ...).

    tags,text
    interface::commandline;role::program;implemented-in::c,tool to convert image formats ...

Rules: packages with a Tag field and a description (one row per package name, its first stanza); the text is
the description with the package's and its source's names removed (make_debian_sections_dataset.py's rules,
long descriptions from Translation-en where apt keeps them); only the --tags most frequent tags are kept (rarer
ones dropped from every row) and rows left without a tag are dropped; at most --max-packages packages, drawn with
a fixed seed; split into train.csv and validation.csv by a hash of the package name. Tags are separated by ';'
(the project's dataset.label_separator). Standard library only; run with /usr/bin/python3:

    /usr/bin/python3 tools/make_debian_tags_dataset.py [--out examples/data/debian_tags]
"""

import argparse
import collections
import csv
import glob
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_debian_sections_dataset as sections  # noqa: E402  (the deb822 reading and the name rules)


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

    if a.dumpavail:
        with open(a.dumpavail, encoding="utf-8", errors="replace") as f:
            avail = f.read()
    else:
        r = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, errors="replace")
        avail = r.stdout
        if r.returncode != 0 or "Package:" not in avail:
            sys.exit("apt-cache dumpavail gave no packages: the package lists are missing. Run (as root)\n"
                     "    apt-get -o Acquire::Languages=en update\nand then this tool again.")
    translations = a.translations
    if translations is None:
        translations = sorted(glob.glob("/var/lib/apt/lists/*_i18n_Translation-en*"))
    long_text = sections.read_translations(translations) if translations else {}

    packages = {}
    for s in sections.stanzas(avail):
        name, short, tag = s.get("Package"), s.get("Description", ""), s.get("Tag", "")
        if not name or not tag or name in packages:
            continue
        tags = sorted({t.strip() for t in tag.replace("\n", " ").split(",") if t.strip()})
        source = s.get("Source", "").split(" ")[0]
        body = long_text.get((name, s.get("Description-md5", "")), "")
        if "\n" in short:
            short, inline = short.split("\n", 1)
            body = body or sections.long_description(inline)
        text = sections.without_names((short + ". " + body) if body else short,
                                      sorted({name, source}, key=len, reverse=True))
        if text and tags:
            packages[name] = (tags, text)
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
        split = "validation" if sections.in_validation(name, a.validation_percent) else "train"
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
