#!/usr/bin/python3
"""tools/make_debian_tags_dataset.py on a made-up package list: the --tags most frequent tags only (rarer ones
dropped from every row, rows left without a tag dropped), tags joined by ';', package and source names removed
from the text, one row per package (its first stanza with tags), long descriptions inline or from a
Translation-en file, and the split by a hash of the package name (tools/debian_packages.py, shared with
make_debian_sections_dataset.py)."""
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "make_debian_tags_dataset.py")


def stanza(name, tags, short, source="", long_lines=None):
    s = "Package: %s\n" % name
    if source:
        s += "Source: %s (1.0-1)\n" % source
    s += "Description: %s\n" % short
    for l in long_lines or []:
        s += " %s\n" % l
    if tags:
        s += "Tag: %s\n" % ", ".join(tags)
    return s + "\n"


def main():
    with tempfile.TemporaryDirectory() as tmp:
        avail = os.path.join(tmp, "avail")
        text = ""
        for i in range(30):
            tags = ["role::program"] + (["interface::commandline"] if i % 2 else []) + (["rare::one"] if i == 3 else [])
            text += stanza("tool%d" % i, tags, "Tool%d converts files" % i, source="srcpkg%d" % i,
                           long_lines=["It reads srcpkg%d input." % i, ".", "Fast."])
        text += stanza("tool0", ["uitoolkit::qt"], "a second stanza of tool0")  # the first stanza wins
        text += stanza("untagged", [], "no tags here")
        text += stanza("onlyrare", ["rare::two"], "only a rare tag")
        open(avail, "w").write(text)
        out = os.path.join(tmp, "out")
        r = subprocess.run([sys.executable, TOOL, "--dumpavail", avail, "--out", out, "--tags", "2",
                            "--translations"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("tool failed: " + r.stderr)
        rows = {}
        for split in ("train", "validation"):
            with open(os.path.join(out, split + ".csv"), encoding="utf-8") as f:
                data = list(csv.reader(f))
            assert data[0] == ["tags", "text"], data[0]
            rows[split] = data[1:]
        every = rows["train"] + rows["validation"]
        assert len(every) == 30, len(every)  # untagged and onlyrare dropped, tool0 once
        assert rows["train"] and rows["validation"], rows
        tags = {t for row in every for t in row[0].split(";")}
        assert tags == {"role::program", "interface::commandline"}, tags
        for row in every:
            assert "tool" not in row[1].lower() and "srcpkg" not in row[1].lower(), row
            assert row[1].endswith("converts files. It reads input. Fast."), row
        assert ["interface::commandline;role::program", "converts files. It reads input. Fast."] in every
        # A second run writes the same files.
        again = os.path.join(tmp, "again")
        subprocess.run([sys.executable, TOOL, "--dumpavail", avail, "--out", again, "--tags", "2", "--translations"],
                       check=True, capture_output=True)
        for split in ("train", "validation"):
            assert open(os.path.join(out, split + ".csv")).read() == open(os.path.join(again, split + ".csv")).read()
    print("make_debian_tags_dataset.py: all checks passed")


if __name__ == "__main__":
    main()
