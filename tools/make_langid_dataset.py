#!/usr/bin/python3
"""Builds the language-identification example data set from Debian word lists.

Each row is one word and the language it comes from:

    label,text
    de,straßenbahn
    fr,éphémère

Sources (Debian packages wamerican, wngerman, wfrench, wspanish, witalian):
/usr/share/dict/{american-english,ngerman,french,spanish,italian}.

Rules: words of letters only (no apostrophes, hyphens or digits), at least 3
of them; acronyms (all capitals) dropped; lowercased; a word that appears in
more than one language's list is dropped from all of them, so every text has
one right answer. The same number of words per language, drawn with a fixed
seed. Standard library only; run with /usr/bin/python3:

    /usr/bin/python3 tools/make_langid_dataset.py [--out examples/data/langid]
"""

import argparse
import csv
import os
import random
import sys

LANGUAGES = [
    ("en", "american-english"),
    ("de", "ngerman"),
    ("fr", "french"),
    ("es", "spanish"),
    ("it", "italian"),
]


def read_words(path):
    words = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            w = line.strip()
            if len(w) < 3 or not w.isalpha():
                continue
            if w.isupper():  # acronyms say nothing about the language
                continue
            words.add(w.lower())
    return words


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dict-dir", default="/usr/share/dict")
    parser.add_argument("--out", default=os.path.normpath(os.path.join(here, "..", "examples", "data", "langid")))
    parser.add_argument("--train-per-language", type=int, default=6000)
    parser.add_argument("--validation-per-language", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()

    lists = {}
    for code, name in LANGUAGES:
        path = os.path.join(args.dict_dir, name)
        if not os.path.exists(path):
            sys.exit(f"{path} not found (install the Debian word list packages: "
                     "wamerican wngerman wfrench wspanish witalian)")
        lists[code] = read_words(path)

    seen_in = {}
    for code, words in lists.items():
        for w in words:
            seen_in[w] = seen_in.get(w, 0) + 1

    rng = random.Random(args.seed)
    need = args.train_per_language + args.validation_per_language
    train, validation = [], []
    for code, _ in LANGUAGES:
        unique = sorted(w for w in lists[code] if seen_in[w] == 1)
        if len(unique) < need:
            sys.exit(f"{code}: only {len(unique)} words of its own, {need} needed")
        chosen = rng.sample(unique, need)
        train += [(code, w) for w in chosen[:args.train_per_language]]
        validation += [(code, w) for w in chosen[args.train_per_language:]]
        print(f"{code}: {len(lists[code])} words, {len(unique)} in no other list", file=sys.stderr)
    rng.shuffle(train)
    rng.shuffle(validation)

    os.makedirs(args.out, exist_ok=True)
    for name, rows in (("train.csv", train), ("validation.csv", validation)):
        path = os.path.join(args.out, name)
        with open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["label", "text"])
            w.writerows(rows)
        print(f"wrote {path}: {len(rows)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
