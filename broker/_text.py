r"""Text hygiene shared by rendering, identifiers and text outputs: what is hidden, and how it folds.

Three operations, all at C speed on long texts (`str.translate` over cached per-character
tables, a few regular expressions), so a turn can afford them on every recalled text:

- `clean`: NFKC; every line break a model may honour (CR, CRLF, VT, FF, NEL, U+2028/9) becomes
  `\n`; invisible characters are removed (format characters such as zero-width and bidi
  controls, Unicode's other default-ignorable code points such as U+034F and the variation
  selectors, tag characters, and blank look-alikes such as U+2800 and the Hangul fillers);
  other control characters become U+FFFD; combining marks piled on an ASCII letter (which
  NFKC could not compose) are dropped. Ordinary text of any script comes out as it went in.
- `skeleton`: each character of a cleaned text replaced by the ASCII character it imitates
  (the Unicode confusables, `_confusables.py`, and Latin letters without their accents),
  one character for one, so an offset in the skeleton is the same offset in the text.
- `fold`: the lowercase skeleton of the cleaned text: what a pattern is matched against.

`hidden_character` finds the first control or invisible character of an identifier, and
`printable` escapes them for a one-line text output.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

from ._confusables import CONFUSABLES

if TYPE_CHECKING:
    from collections.abc import Callable

REPLACEMENT = "\ufffd"
"""What a control character becomes in rendered text."""

# Default-ignorable code points that are not format characters (Cf), from Unicode's
# DerivedCoreProperties, plus characters that render blank: U+2800 BRAILLE PATTERN BLANK.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE0FFF),
)
_LINE_BREAKS = re.compile("\r\n?|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ASCII_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f]")
# Marks on an ASCII letter that NFKC left uncomposed ("zalgo" text hides words this way).
_PILED_MARKS = re.compile("(?<=[A-Za-z])[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
_KEPT_CONTROLS = frozenset((0x09, 0x0A))
_CACHE_LIMIT = 65_536


def is_invisible(code: int) -> bool:
    """True for a character that renders as nothing: format, default-ignorable, blank."""
    if unicodedata.category(chr(code)) == "Cf":
        return True
    return any(low <= code <= high for low, high in _IGNORABLE_RANGES)


def is_control(code: int) -> bool:
    """True for a control, separator-of-lines, surrogate or private-use character (tab and LF too)."""
    return unicodedata.category(chr(code)) in {"Cc", "Cs", "Co", "Zl", "Zp"}


class _Table(dict[int, int | str | None]):
    """A `str.translate` table that computes each character's entry once, on first sight.

    Lookups of characters already seen stay in C; a text has few distinct characters. The
    cache stops growing at `_CACHE_LIMIT` entries, so no stream of texts can grow it without
    bound.
    """

    def __init__(self, rule: Callable[[int], int | str | None]) -> None:
        super().__init__()
        self._rule = rule

    def __missing__(self, code: int) -> int | str | None:
        value = self._rule(code)
        if len(self) < _CACHE_LIMIT:
            self[code] = value
        return value


def _clean_rule(code: int) -> int | str | None:
    if is_invisible(code):
        return None
    if code not in _KEPT_CONTROLS and unicodedata.category(chr(code)) in {"Cc", "Cs"}:
        return REPLACEMENT
    return code


def _skeleton_rule(code: int) -> int:
    if code in CONFUSABLES:
        return CONFUSABLES[code]
    # A Latin letter with accents imitates its base letter: `ṁ` -> `m`.
    base = unicodedata.normalize("NFKD", chr(code))
    if len(base) > 1 and base[0].isascii() and all(unicodedata.combining(c) for c in base[1:]):
        return ord(base[0])
    return code


_CLEAN = _Table(_clean_rule)
_SKELETON = _Table(_skeleton_rule)


def clean(text: str) -> str:
    """NFKC, line breaks unified, invisible characters removed, controls replaced (see above)."""
    if text.isascii():
        text = _LINE_BREAKS.sub("\n", text)
        return _ASCII_CONTROLS.sub(REPLACEMENT, text)
    text = _LINE_BREAKS.sub("\n", unicodedata.normalize("NFKC", text))
    text = text.translate(_CLEAN)
    # NFKC again: removing a character can bring a base and its mark together.
    return _PILED_MARKS.sub("", unicodedata.normalize("NFKC", text))


def skeleton(cleaned: str) -> str:
    """Each character replaced by the ASCII one it imitates; same length as `cleaned`."""
    if cleaned.isascii():
        return cleaned
    return cleaned.translate(_SKELETON)


def fold(text: str) -> str:
    """The lowercase skeleton of the cleaned text: what structural patterns are matched against."""
    return skeleton(clean(text)).lower()


def hidden_character(text: str) -> str | None:
    """The first control or invisible character of `text` (tab and newline count), or None."""
    if text.isascii() and text.isprintable():  # the common case: 0x20-0x7e only, none hidden
        return None
    return next((c for c in text if _hidden(c)), None)


def printable(text: str) -> str:
    r"""`text` for one line of a text output: control and invisible characters escaped.

    A newline becomes `\n`, a zero-width space `\u200b`, a backslash stays itself, so an id
    or a memory cannot start a forged line of `audit`, `recall` or `select` output.
    """
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(c) if _hidden(c) or not c.isprintable() else c for c in text)


def _hidden(char: str) -> bool:
    code = ord(char)
    return (code < 0x20 or code >= 0x7F) and (is_control(code) or is_invisible(code))


def _escape(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")
