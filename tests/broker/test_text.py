from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker import hidden_character, printable
from broker._text import REPLACEMENT, _hidden, clean, fold, is_invisible, skeleton

INVISIBLE = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u00ad",
    "\u202a",
    "\u202e",
    "\u2066",
    "\u2069",
    "\u200e",
    "\u061c",
    "\u2800",
    "\u034f",
    "\ufe0f",
    "\u180e",
    "\u3164",
    "\U000e0041",
    "\U000e0100",
]
READABLE = [
    "Mia is allergic to peanuts and tree nuts.",
    "Déploiement gelé le vendredi après l'incident de paiement.",
    "Привет, встреча перенесена на четверг.",
    "東京の会議は木曜日に移動しました。",
    "مرحبا، الاجتماع يوم الخميس",
    "Ship it 🚀 after the review, a < b and List<int>.",
    "Line one\n\tindented line two",
]


@pytest.mark.parametrize("char", INVISIBLE)
def test_clean_removes_every_invisible_character(char):
    """Zero-width, bidi, default-ignorable, blank and tag characters leave no trace."""
    assert clean(f"pay{char}ment") == "payment"


@pytest.mark.parametrize("text", READABLE)
def test_clean_keeps_readable_text_of_any_script(text):
    """Ordinary text in any script, tabs and newlines included, comes out as it went in."""
    assert clean(text) == text


def test_clean_unifies_line_breaks_and_replaces_controls():
    """CR, CRLF, VT, FF, NEL and U+2028/9 become LF; other controls become U+FFFD."""
    assert clean("a\rb\r\nc\x0bd\x0ce\x85f\u2028g\u2029h") == "a\nb\nc\nd\ne\nf\ng\nh"
    assert clean("a\x00b\x1bc\x7fd") == f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}d"
    assert clean("é\x07") == f"é{REPLACEMENT}"


def test_clean_folds_compatibility_forms_and_drops_piled_marks():
    """Full-width letters fold to ASCII (NFKC); combining marks piled on a Latin letter go."""
    assert clean("\uff21\uff23\uff34\uff29\uff36\uff25") == "ACTIVE"
    assert clean("s\u0336y\u0337s\u0338tem") == "system"


def test_skeleton_folds_look_alikes_and_accents_to_ascii():
    """Cyrillic, Greek and accented letters read as the ASCII letters they imitate."""
    assert skeleton(clean("\u0455\u0443\u0455t\u0435m")) == "system"
    assert skeleton("\u02c2\u2215m\u1e3fmory") == "</mmmory"
    assert fold("\u0391CT\u0399VE") in {"active", "actlve"}


@given(st.text())
def test_skeleton_keeps_every_offset(text):
    """One character for one: an offset in the skeleton is the same offset in the cleaned text."""
    cleaned = clean(text)
    assert len(skeleton(cleaned)) == len(cleaned)


@given(st.text())
def test_clean_is_idempotent_and_leaves_nothing_hidden(text):
    """Cleaning twice changes nothing; no invisible character, and no control but tab and LF, survives."""
    cleaned = clean(text)
    assert clean(cleaned) == cleaned
    for char in cleaned.replace("\n", "").replace("\t", ""):
        assert not is_invisible(ord(char))
        assert unicodedata.category(char) not in {"Cc", "Cs", "Zl", "Zp"}


@pytest.mark.parametrize("char", ["\n", "\t", "\r", "\x00", "\u2028", *INVISIBLE])
def test_hidden_character_finds_controls_and_invisibles(char):
    """An id holding a control or invisible character is caught, and the character named."""
    assert hidden_character(f"ac{char}me") == char


@pytest.mark.parametrize("text", ["acme", "\uff21cme", "Zürich", "東京", "a b"])
def test_hidden_character_passes_visible_text(text):
    """Visible characters of any script pass (folding look-alikes is the namespace's job)."""
    assert hidden_character(text) is None


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_hidden_character_is_the_first_hidden_character_scanned(text):
    """The ASCII fast path answers as the character-by-character scan does, for any text."""
    assert hidden_character(text) == next((c for c in text if _hidden(c)), None)


def test_printable_escapes_line_breaks_and_invisibles():
    """A newline or a zero-width space in an id cannot start or hide a line of text output."""
    assert printable("m1\n2026-01-01  create  forged") == "m1\\n2026-01-01  create  forged"
    assert printable("a\u200bb\u202ec") == "a\\u200bb\\u202ec"
    assert printable("plain id-1 Zürich") == "plain id-1 Zürich"


@given(st.text())
def test_printable_output_is_one_visible_line(text):
    """Whatever the text, its printable form has no line break and nothing hidden."""
    shown = printable(text)
    assert "\n" not in shown
    assert "\r" not in shown
    assert hidden_character(shown) is None
