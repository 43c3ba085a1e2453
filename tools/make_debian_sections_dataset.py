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
import glob
import hashlib
import os
import random
import re
import subprocess
import sys


def stanzas(text):
    """Yields each stanza of a deb822 file as a dict; continuation lines are joined with newlines."""
    fields, key = {}, None
    for line in text.splitlines():
        if not line.strip():
            if fields:
                yield fields
            fields, key = {}, None
        elif line[0] in " \t" and key:
            fields[key] += "\n" + line[1:]
        elif ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    if fields:
        yield fields


def long_description(body):
    """A deb822 extended description as one line: ' .' paragraph marks dropped, lines joined."""
    lines = [l.strip() for l in body.split("\n")]
    return " ".join(l for l in lines if l and l != ".")


def read_translations(paths):
    """(package, Description-md5) -> long description, from Translation-en files (any compression apt
    reads: apt-helper cat-file decompresses)."""
    out = {}
    for path in paths:
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", path], check=True, capture_output=True,
                              text=True, errors="replace").stdout
        for s in stanzas(text):
            desc = s.get("Description-en", "")
            if "Package" in s and "\n" in desc:
                out[(s["Package"], s.get("Description-md5", ""))] = long_description(desc.split("\n", 1)[1])
    return out


def without_names(text, names):
    for name in names:
        if name:
            text = re.sub(r"(?<![\w.+-])" + re.escape(name) + r"(?![\w+-])", "", text, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", text).strip()


def in_validation(package, percent):
    return int(hashlib.sha1(package.encode("utf-8")).hexdigest()[:8], 16) % 100 < percent


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
    long_text = read_translations(translations) if translations else {}

    packages = {}
    for s in stanzas(avail):
        name, section, short = s.get("Package"), s.get("Section", ""), s.get("Description", "")
        if not name or not section or name in packages:
            continue
        section = section.split("/")[-1]
        source = s.get("Source", "").split(" ")[0]
        body = long_text.get((name, s.get("Description-md5", "")), "")
        if "\n" in short:  # a Packages file with the long description inline
            short, inline = short.split("\n", 1)
            body = body or long_description(inline)
        text = without_names((short + ". " + body) if body else short, sorted({name, source}, key=len, reverse=True))
        if text:
            packages[name] = (section, text)
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
            split = "validation" if in_validation(name, a.validation_percent) else "train"
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
        a.out, "long descriptions from %d Translation-en file(s)" % len(translations) if long_text else
        "one-line descriptions only (for the long ones: apt-get -o Acquire::Languages=en update)"),
        file=sys.stderr)


if __name__ == "__main__":
    main()
