"""Text analysis shared by indexing, querying and scoring: one tokenizer, so the index and
the scorer always agree on what a term is."""

from __future__ import annotations

import functools
import re
import unicodedata

import Stemmer  # PyStemmer: the Snowball stemmers in C

# English function words and conversational fillers: they never make a memory relevant.
# Kept small on purpose; informativeness beyond this is left to per-namespace IDF.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just let me more most mustn my
    myself no nor not now of off on once only or other ought our ours ourselves out over own
    same shan she should shouldn so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was wasn we were weren what
    when where which while who whom why will with won would wouldn you your yours yourself
    yourselves s t d ll m re ve y o ma also yes yeah ok okay oh hey hi hello please thanks thank
    really much many well get got go going gonna want wanna like lot lots thing things something
    anything everything nothing one ones us may might must shall yet still even ever every
    """.split()  # noqa: SIM905 - a word list reads best as text
)

_TOKEN = re.compile(r"[^\W_]+")
_STEMMER = Stemmer.Stemmer("english")
MAX_TERM_CHARS = 64
# Candidate texts recur across turns (a popular memory, a session summary): their analysis
# is cached per process, up to this many texts of at most this many characters.
_CACHED_TEXTS = 4096
_CACHED_CHARS = 2000


def _fold(text: str) -> str:
    """Case-fold and strip diacritics, so `Café` and `cafe` are one term."""
    if text.isascii():  # the common case, and the hot path of scoring: no marks to strip
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    stem: str = _STEMMER.stemWord(word)
    return stem


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _terms(text: str) -> tuple[str, ...]:
    return tuple(_analyse(text))


def terms(text: str) -> list[str]:
    """The informative terms of a text, in order, stop words and punctuation removed."""
    return list(_terms(text)) if len(text) <= _CACHED_CHARS else _analyse(text)


def _analyse(text: str) -> list[str]:
    """The informative terms of a text, in order, stop words and punctuation removed."""
    out: list[str] = []
    for word in _TOKEN.findall(_fold(text)):
        if word in STOP_WORDS or len(word) > MAX_TERM_CHARS:
            continue
        stem = _stem(word)
        if stem and stem not in STOP_WORDS:
            out.append(stem)
    return out


def index_text(text: str) -> str:
    """The analysed form stored in the FTS index: terms joined by spaces."""
    return " ".join(terms(text))


def query_terms(text: str) -> tuple[str, ...]:
    """Unique informative terms of a query, in first-seen order."""
    return tuple(dict.fromkeys(terms(text)))


def fts_query(qterms: tuple[str, ...]) -> str:
    """An FTS5 MATCH expression OR-ing the terms; each is quoted, so no text is ever syntax."""
    return " OR ".join(f'"{t}"' for t in qterms)
