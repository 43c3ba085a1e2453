#!/usr/bin/python3
"""tools/make_debian_sections_dataset.py on a made-up package list: the largest sections only, balanced,
package and source names removed from the text, sections without their component, one row per package,
long descriptions from a Translation-en file or inline, and a split that depends on the package name
alone (the same files on a second run, and a package keeps its split when others are added)."""
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "make_debian_sections_dataset.py")


def stanza(name, section, short, source="", md5="", long_lines=None):
    s = "Package: %s\n" % name
    if source:
        s += "Source: %s (1.0-1)\n" % source
    s += "Description: %s\n" % short
    for l in long_lines or []:
        s += " %s\n" % l
    if md5:
        s += "Description-md5: %s\n" % md5
    return s + "Section: %s\n\n" % section


def run(avail, out, *extra):
    r = subprocess.run([sys.executable, TOOL, "--dumpavail", avail, "--out", out, "--sections", "2"] + list(extra),
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("tool failed: " + r.stderr)
    rows = {}
    for split in ("train", "validation"):
        with open(os.path.join(out, split + ".csv"), encoding="utf-8") as f:
            data = list(csv.reader(f))
        assert data[0] == ["label", "text"], data[0]
        rows[split] = data[1:]
    return rows, r.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        avail = os.path.join(tmp, "avail")
        parts = []
        for i in range(30):  # games: 30, in contrib and main
            parts.append(stanza("tuxgame%d" % i, "contrib/games" if i % 3 == 0 else "games",
                                "Tuxgame%d is a racing game, see TUXGAME%d. Data: tuxgame%d-data" % (i, i, i)))
        for i in range(12):  # net: 12, the smaller of the two largest
            parts.append(stanza("netd%d" % i, "net", "daemon for networks (netd%d)" % i, source="netd-src%d" % i,
                                md5="m%d" % i))
        for i in range(3):  # doc: 3, left out
            parts.append(stanza("manual%d" % i, "doc", "manual pages"))
        parts.append(stanza("tuxgame1", "net", "a second stanza of tuxgame1, ignored"))
        parts.append(stanza("inl-pkg", "net", "inline long description", long_lines=["first line", ".", "second"]))
        with open(avail, "w") as f:
            f.write("".join(parts))
        translation = os.path.join(tmp, "Translation-en")
        with open(translation, "w") as f:
            f.write("Package: netd0\nDescription-md5: m0\nDescription-en: daemon for networks\n"
                    " The netd0 daemon (from netd-src0) serves packets.\n .\n More text.\n\n")

        out = os.path.join(tmp, "out")
        rows, log = run(avail, out, "--translations", translation)
        every = rows["train"] + rows["validation"]
        labels = [r[0] for r in every]
        assert sorted(set(labels)) == ["games", "net"], sorted(set(labels))
        assert labels.count("games") == labels.count("net") == 13, (labels.count("games"), labels.count("net"))
        assert len(rows["validation"]) > 0 and len(rows["train"]) > len(rows["validation"]), \
            (len(rows["train"]), len(rows["validation"]))
        for label, text in every:
            low = text.lower()
            # The names go, whole words only (tuxgameN-data is another package's name and stays).
            assert "tuxgame" not in low.replace("-data", "").replace(": tuxgame", ""), text
            assert "netd" not in low, text
            assert "a second stanza" not in low, text
        assert any(t.startswith("is a racing game, see . Data: tuxgame") and t.endswith("-data") for _, t in every), \
            every
        assert any(t == "daemon for networks (). The daemon (from ) serves packets. More text." for _, t in every), \
            [t for l, t in every if l == "net"]
        assert any(t == "inline long description. first line second" for _, t in every), every
        assert "long descriptions from 1 Translation-en file(s)" in log, log

        # The same files on a second run; a package keeps its split when the list grows.
        again, _ = run(avail, os.path.join(tmp, "again"), "--translations", translation)
        assert again == rows, "a second run wrote other files"
        with open(avail, "a") as f:
            f.write("".join(stanza("extra%d" % i, "net", "more networking %d" % i) for i in range(40)))
        grown, log2 = run(avail, os.path.join(tmp, "grown"), "--translations")
        assert "one-line descriptions only" in log2, log2
        # (More net packages: all 30 games are now drawn, so the games' rows grow; none changes split.)
        for split, other in (("train", "validation"), ("validation", "train")):
            before = {t for _, t in rows[split] if "racing" in t}
            assert before <= {t for _, t in grown[split]}, split
            assert not before & {t for _, t in grown[other]}, split
        assert sum(1 for _, t in grown["train"] + grown["validation"] if "racing" in t) == 30
    print("make_debian_sections_dataset.py: all checks passed")


if __name__ == "__main__":
    main()
