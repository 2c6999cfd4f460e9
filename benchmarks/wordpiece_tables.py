"""Make `sources/data/wordpiece-tables.json`: the character classes of Hugging Face `tokenizers`'
BertNormalizer and BertPreTokenizer, probed code point by code point (about 6 s).

    python -m benchmarks.wordpiece_tables   # needs the test extra (tokenizers)
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from tokenizers.normalizers import NFD, BertNormalizer, Lowercase
from tokenizers.pre_tokenizers import BertPreTokenizer

OUT = Path(__file__).resolve().parent.parent / "sources" / "data" / "wordpiece-tables.json"


def _ranges(codes: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for code in codes:
        if out and out[-1][1] == code - 1:
            out[-1][1] = code
        else:
            out.append([code, code])
    return out


def tables() -> dict[str, object]:
    """The classes: dropped, whitespace, stripped marks, punctuation; decompositions and
    lowercases that differ from this Python's."""
    clean = BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    strip = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    nfd, lower, pre = NFD(), Lowercase(), BertPreTokenizer()
    drop: list[int] = []
    space: list[int] = []
    marks: list[int] = []
    punct: list[int] = []
    nfd_diff: dict[int, str] = {}
    low_diff: dict[int, str] = {}
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        cleaned = clean.normalize_str(f"a{char}b")
        if cleaned == "ab":
            drop.append(code)
        elif cleaned == "a b" and char != " ":
            space.append(code)
        theirs = nfd.normalize_str(char)
        if theirs != unicodedata.normalize("NFD", char):
            nfd_diff[code] = theirs
        if len(unicodedata.normalize("NFD", char)) == 1 and strip.normalize_str(f"a{char}b") == "ab":
            marks.append(code)
        lowered = lower.normalize_str(char)
        if lowered != char.lower():
            low_diff[code] = lowered
        if [w for w, _ in pre.pre_tokenize_str(f"a{char}b")] == ["a", char, "b"]:
            punct.append(code)
    return {
        "drop": _ranges(drop),
        "ws": _ranges(space),
        "mn": _ranges(marks),
        "punct": _ranges(punct),
        "nfd_diff": nfd_diff,
        "low_diff": low_diff,
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(tables(), separators=(",", ":")), encoding="utf-8")
    print(f"wrote {OUT}")
