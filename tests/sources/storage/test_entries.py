"""Entry values: which episodic entries are a conversation's turns (`is_turn`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sources.storage._entries import TURN_HEAD_CHARS, is_turn


@pytest.mark.parametrize(
    "text",
    [
        "Caroline: Hey, how was the pottery class?",
        "Dr. Alvarez: open wide",
        "Ben Li: sounds good",
        "Élodie Durand: bonjour",
        "张伟: 你好",
        "Mary-Jane O'Neil: yes",
        "Incident: checkout was down",  # a label reads as a speaker (documented)
    ],
)
def test_a_text_that_opens_with_who_says_it_is_a_turn(text: str) -> None:
    """One to four words opening the text, then ': ' and a word, make a turn (a capital first
    where the script has capitals)."""
    assert is_turn("note", text)


@pytest.mark.parametrize(
    "text",
    [
        "The Harbor backend stores shipments in PostgreSQL.",
        "On March 14 the label service went down: 40 minutes",
        "Daily standup is at 9:30 CET",
        "caroline: hi",
        "Jo:hi",
        "Five words before the colon: no",
        ": empty speaker",
    ],
)
def test_a_note_that_names_no_speaker_is_not_a_turn(text: str) -> None:
    """A sentence with a colon late, a time, a lower-case opening or no space after ':' is no turn."""
    assert not is_turn("note", text)


@given(st.text(max_size=200))
def test_a_message_is_always_a_turn_and_only_the_head_is_read(text: str) -> None:
    """Any message is a turn; for a note only the first `TURN_HEAD_CHARS` characters decide, as
    the engines read them."""
    assert is_turn("message", text)
    assert is_turn("note", text) == is_turn("note", text[:TURN_HEAD_CHARS])


def test_the_longest_speaker_fits_the_head() -> None:
    """Four words of 20 characters, their spaces, ': ' and a character fit in the head."""
    speaker = " ".join(["A" + "b" * 19] * 4)
    assert is_turn("note", f"{speaker}: x")
    assert not is_turn("note", f"{speaker}b: x")
