"""The shipped look-alike table is exactly what the maintained Unicode data says, plus our extras.

Run as a script to regenerate it: `python tests/broker/test_confusables.py > broker/data/confusables.txt`.
"""

from __future__ import annotations

import string
import sys
import unicodedata

from confusable_homoglyphs import confusables as unicode_confusables

from broker._confusables import CONFUSABLES

# Look-alikes of the characters our markup and the chat templates are made of that the
# Unicode data does not list as one ASCII character (it maps some to sequences, some to
# other look-alikes): angle brackets, slashes, bars, square brackets, colons and hyphens.
EXTRA: dict[str, str] = {
    "<": "\u00ab\u2039\u2329\u27e8\u27ea\u3008\u300a\u276c\u276e\u2770\u29fc\u2991\u2993\u226a\u02c2\u1438",
    ">": "\u00bb\u203a\u232a\u27e9\u27eb\u3009\u300b\u276d\u276f\u2771\u29fd\u2992\u2994\u226b\u02c3\u1433",
    "/": "\u2215\u2044\u29f8\u2571\u27cb\u1735\u30ce",
    "|": "\u01c0\u2223\u2502\u2503\u2758\u23d0\u05c0\u239c\u239f",
    "[": "\u3010\u3014\u3016\u3018\u301a\u27e6\u2045\u298b\u298d\u298f",
    "]": "\u3011\u3015\u3017\u3019\u301b\u27e7\u2046\u298c\u298e\u2990",
    ":": "\u2236\ua789\u02d0\u02f8\u0589\u05c3\u16ec\u205a",
    "-": "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\u02d7\u2796",
    "#": "\u266f",
}

# Letters first: a Greek omicron should fold to `o`, not to `0`, for tag names to match.
PREFERENCE = string.ascii_lowercase + string.ascii_uppercase + string.punctuation + string.digits


def derive() -> dict[int, int]:
    """Every non-ASCII character the Unicode data lists as imitating one printable ASCII one."""
    table: dict[int, int] = {}
    data = unicode_confusables.confusables_data
    for target in PREFERENCE:
        for entry in data.get(target, ()):
            char = entry["c"]
            if len(char) == 1 and not char.isascii():
                table.setdefault(ord(char), ord(target))
    for target, chars in EXTRA.items():
        for char in chars:
            table[ord(char)] = ord(target)
    return dict(sorted(table.items()))


def render_table(table: dict[int, int]) -> str:
    """The text of broker/data/confusables.txt for `table`."""
    return "".join(f"{k:04X} {v:02X} {unicodedata.name(chr(k), '?')} -> {chr(v)}\n" for k, v in table.items())


def test_table_matches_the_unicode_confusables_data():
    """The shipped table is the derivation of the maintained data: nothing added, nothing lost."""
    assert derive() == CONFUSABLES


def test_the_look_alikes_named_in_the_issue_fold_to_what_they_imitate():
    """U+02C2, U+1438, U+276E, U+300A fold to `<`; U+2215, U+2044 to `/`; Cyrillic to Latin."""
    expected = {
        "\u02c2": "<",
        "\u1438": "<",
        "\u276e": "<",
        "\u300a": "<",
        "\u2215": "/",
        "\u2044": "/",
        "\u0430": "a",  # Cyrillic a
        "\u0435": "e",  # Cyrillic ie
        "\u043e": "o",  # Cyrillic o
        "\u0440": "p",  # Cyrillic er
        "\u0441": "c",  # Cyrillic es
        "\u0455": "s",  # Cyrillic dze
        "\u03bf": "o",  # Greek omicron
    }
    for char, ascii_char in expected.items():
        assert chr(CONFUSABLES[ord(char)]) == ascii_char, f"U+{ord(char):04X}"


def test_every_entry_folds_a_non_ascii_character_to_printable_ascii():
    """The table is 1:1 from non-ASCII to printable ASCII, so folding keeps every offset."""
    assert len(CONFUSABLES) > 1000
    assert all(k > 0x7F for k in CONFUSABLES)
    assert all(chr(v) in string.printable and chr(v) not in string.whitespace for v in CONFUSABLES.values())


if __name__ == "__main__":
    sys.stdout.write(render_table(derive()))
