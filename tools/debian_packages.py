"""The Debian package lists as text data sets, shared by tools/make_debian_sections_dataset.py and
tools/make_debian_tags_dataset.py: `apt-cache dumpavail` (or a file, for tests) read as deb822 stanzas, long
descriptions from apt's Translation-en files, and each package's text with its own and its source package's names
removed (whole words, any case), so that the name cannot give its section or tags away. A package's split comes
from a hash of its name alone: it keeps its split when other packages come or go. Standard library only.
"""

import glob
import hashlib
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


def read_avail(dumpavail=None):
    """The package list: the file `dumpavail` names, or `apt-cache dumpavail`'s output (exits saying how to get
    the lists when apt has none)."""
    if dumpavail:
        with open(dumpavail, encoding="utf-8", errors="replace") as f:
            return f.read()
    r = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, errors="replace")
    if r.returncode != 0 or "Package:" not in r.stdout:
        sys.exit("apt-cache dumpavail gave no packages: the package lists are missing. Run (as root)\n"
                 "    apt-get -o Acquire::Languages=en update\nand then this tool again.")
    return r.stdout


def long_texts(translations=None):
    """read_translations of the given Translation-en files, or of those in /var/lib/apt/lists (None); with the
    number of files read."""
    if translations is None:
        translations = sorted(glob.glob("/var/lib/apt/lists/*_i18n_Translation-en*"))
    return (read_translations(translations) if translations else {}), len(translations)


def package_texts(avail, long_text, wanted=lambda stanza: True):
    """Yields (name, stanza, text) for the first stanza of each package name that is `wanted` and has a non-empty
    text: its one-line description and its long one (Translation-en's, else the stanza's inline one), its names
    removed."""
    seen = set()
    for s in stanzas(avail):
        name = s.get("Package")
        if not name or name in seen or not wanted(s):
            continue
        short = s.get("Description", "")
        source = s.get("Source", "").split(" ")[0]
        body = long_text.get((name, s.get("Description-md5", "")), "")
        if "\n" in short:  # a Packages file with the long description inline
            short, inline = short.split("\n", 1)
            body = body or long_description(inline)
        text = without_names((short + ". " + body) if body else short, sorted({name, source}, key=len, reverse=True))
        if text:
            seen.add(name)
            yield name, s, text
