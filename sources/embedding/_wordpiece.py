"""The embedding model's tokenizer: uncased BERT WordPiece, in Python, giving the token ids of
Hugging Face `tokenizers` (BertNormalizer(lowercase=True), BertPreTokenizer, WordPiece, [CLS] $A [SEP]).

Its character classes are not Python's `unicodedata` (whose Unicode version moves with Python) but
the ones `tokenizers` uses, frozen in `data/wordpiece-tables.json` (made by
`python -m benchmarks.wordpiece_tables` from `tokenizers`): which characters the cleaning drops,
which are whitespace, which non-spacing marks the accent stripping drops, which are punctuation,
and the few whose decomposition or lowercase differs from Python's.
"""

from __future__ import annotations

import bisect
import functools
import json
import unicodedata
from importlib.resources import files
from typing import TYPE_CHECKING, Final

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    import numpy.typing as npt

MAX_WORD_CHARS: Final = 100
"""A word longer than this (in characters) is one [UNK], as `tokenizers`' WordPiece default."""
_CJK: Final = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip


class _Tables:
    """`tokenizers`' character classes, as sorted ranges."""

    def __init__(self) -> None:
        raw = json.loads((files("sources") / "data" / "wordpiece-tables.json").read_text(encoding="utf-8"))
        self.ranges = {
            k: ([a for a, _ in raw[k]], [b for _, b in raw[k]]) for k in ("drop", "ws", "mn", "punct")
        }
        self.nfd = {int(k): v for k, v in raw["nfd_diff"].items()}
        self.lower = {int(k): v for k, v in raw["low_diff"].items()}

    def has(self, kind: str, char: str) -> bool:
        starts, ends = self.ranges[kind]
        i = bisect.bisect_right(starts, ord(char)) - 1
        return i >= 0 and ord(char) <= ends[i]


@functools.cache
def _tables() -> _Tables:
    return _Tables()


@functools.cache
def _cleaned(char: str) -> str:
    """What the cleaning makes of one character: nothing, a space, itself spaced (CJK), itself."""
    t = _tables()
    if t.has("drop", char):
        return ""
    if t.has("ws", char):
        return " "
    code = ord(char)
    if any(lo <= code <= hi for lo, hi in _CJK):
        return f" {char} "
    return char


@functools.cache
def _folded(char: str) -> str:
    """One character of the decomposed text, its accent dropped and lowercased (char by char)."""
    t = _tables()
    if t.has("mn", char):
        return ""
    return t.lower.get(ord(char)) or char.lower()


@functools.cache
def _is_punct(char: str) -> bool:
    return _tables().has("punct", char)


def normalize(text: str) -> str:
    """BertNormalizer(lowercase=True): clean, space CJK, decompose, strip accents, lowercase."""
    cleaned = "".join(map(_cleaned, text))
    if cleaned.isascii():
        return cleaned.lower()
    nfd = _tables().nfd
    if nfd and any(ord(c) in nfd for c in cleaned):
        decomposed = "".join(nfd.get(ord(c)) or unicodedata.normalize("NFD", c) for c in cleaned)
    else:
        decomposed = unicodedata.normalize("NFD", cleaned)
    return "".join(map(_folded, decomposed))


def words(normalized: str) -> list[str]:
    """BertPreTokenizer: split at spaces, each punctuation character a word of its own."""
    out: list[str] = []
    for chunk in normalized.split(" "):
        start = 0
        for i, char in enumerate(chunk):
            if _is_punct(char):
                if i > start:
                    out.append(chunk[start:i])
                out.append(char)
                start = i + 1
        if start < len(chunk):
            out.append(chunk[start:])
    return out


class WordPieceTokenizer:
    """Token ids of texts, [CLS] ... [SEP], truncated to `max_tokens`; thread-safe."""

    def __init__(self, vocab_path: Path, max_tokens: int) -> None:
        vocab: dict[str, int] = {}
        with vocab_path.open(encoding="utf-8") as f:
            for i, line in enumerate(f):
                vocab.setdefault(line.rstrip("\r\n"), i)
        self._vocab = vocab
        self.unk, self.cls, self.sep, self.pad = (vocab[t] for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"))
        self.max_tokens = max_tokens
        self._word = functools.lru_cache(maxsize=65536)(self._word_ids)

    def token_to_id(self, token: str) -> int | None:
        return self._vocab.get(token)

    def _word_ids(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match-first WordPiece ("##" continuations); [UNK] for the whole word
        when a piece has no match or the word is over `MAX_WORD_CHARS`."""
        if len(word) > MAX_WORD_CHARS:
            return (self.unk,)
        ids: list[int] = []
        start, n, vocab = 0, len(word), self._vocab
        while start < n:
            end, found = n, None
            while start < end:
                found = vocab.get(word[start:end] if start == 0 else "##" + word[start:end])
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk,)
            ids.append(found)
            start = end
        return tuple(ids)

    def encode(self, text: str) -> list[int]:
        """[CLS] the text's ids [SEP], its ids cut to `max_tokens` - 2."""
        ids: list[int] = []
        limit = self.max_tokens - 2
        for word in words(normalize(text)):
            ids.extend(self._word(word))
            if len(ids) >= limit:
                del ids[limit:]
                break
        return [self.cls, *ids, self.sep]

    def encode_batch(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Ids and attention mask of texts, padded with [PAD] to the longest: two (batch, seq) arrays."""
        encoded = [self.encode(t) for t in texts]
        width = max((len(e) for e in encoded), default=0)
        ids = np.full((len(encoded), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(encoded), width), dtype=np.int64)
        for row, e in enumerate(encoded):
            ids[row, : len(e)] = e
            mask[row, : len(e)] = 1
        return ids, mask


__all__ = ["MAX_WORD_CHARS", "WordPieceTokenizer", "normalize", "words"]
