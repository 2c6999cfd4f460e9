"""Look-alike characters and the one printable ASCII character each imitates.

The table (`data/confusables.txt`: one look-alike a line, its code point and the code point of
the ASCII character it imitates, in hex, then their names) is generated from the Unicode
confusables data that `confusable-homoglyphs` 3.3.1 ships (a character listed as imitating one
ASCII character; letters preferred over punctuation and digits), plus look-alike brackets,
slashes, bars, colons and hyphens of our own. Do not edit it: regenerate it with
`python tests/broker/test_confusables.py > broker/data/confusables.txt`; the test fails while
the table and its sources disagree.
"""

from importlib import resources


def _load() -> dict[int, int]:
    text = resources.files("broker").joinpath("data", "confusables.txt").read_text(encoding="utf-8")
    pairs = (line.split(" ", 2)[:2] for line in text.splitlines() if line.strip())
    return {int(char, 16): int(ascii_char, 16) for char, ascii_char in pairs}


CONFUSABLES: dict[int, int] = _load()
"""Code point of a look-alike -> code point of the ASCII character it imitates."""
