"""sources.embedding._wordpiece gives the token ids of Hugging Face `tokenizers` (the test extra's reference)."""

from __future__ import annotations

from importlib.resources import as_file, files

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sources.embedding._wordpiece import WordPieceTokenizer, normalize, words

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Tokenizer  # noqa: E402
from tokenizers.models import WordPiece  # noqa: E402
from tokenizers.normalizers import BertNormalizer  # noqa: E402
from tokenizers.pre_tokenizers import BertPreTokenizer  # noqa: E402
from tokenizers.processors import TemplateProcessing  # noqa: E402


def _reference(max_tokens: int) -> Tokenizer:
    """The tokenizer the embedder used before sources.embedding._wordpiece."""
    with as_file(files("sources") / "data" / "minilm-vocab.txt") as vocab:
        tok = Tokenizer(WordPiece.from_file(str(vocab), unk_token="[UNK]"))  # noqa: S106
    tok.normalizer = BertNormalizer(lowercase=True)
    tok.pre_tokenizer = BertPreTokenizer()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    tok.enable_truncation(max_tokens)
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")  # noqa: S106
    return tok


def _ours(max_tokens: int) -> WordPieceTokenizer:
    with as_file(files("sources") / "data" / "minilm-vocab.txt") as vocab:
        return WordPieceTokenizer(vocab, max_tokens)


TEXTS = [
    "Hello, Café world!", " ".join("".join(chr(ord(c) + 0xFEE0) for c in w) for w in ("Fullwidth", "ABC", "123")), "日本語のテキストです。東京タワー", "한국어 문장 테스트입니다",
    "Ελληνικά κείμενα ΆΈΉ ΣΑΣ", "Русский текст: Ёжик", "العربية: مرحبا", "emoji 😀👍🏽👨‍👩‍👧 ❤️", "zero\u200bwidth\u200d\ufeff",
    "tab\tnew\nline\r\n\x00null\x07bell\x7fdel\x85", "e\u0301 a\u0308 İstanbul ǅ ß ﬁ", "a" * 100, "a" * 101, "x " * 600,
    "don't U.S.A. $TICKER #tag user@mail.org https://example.com/a?b=c", "", "   ",
]  # fmt: skip


@pytest.mark.parametrize("max_tokens", [256, 512])
def test_batches_have_the_reference_ids_and_masks(max_tokens: int) -> None:
    ref, ours = _reference(max_tokens), _ours(max_tokens)
    encodings = ref.encode_batch(TEXTS)
    ids, mask = ours.encode_batch(TEXTS)
    np.testing.assert_array_equal(ids, [e.ids for e in encodings])
    np.testing.assert_array_equal(mask, [e.attention_mask for e in encodings])


def test_every_code_point_normalises_and_splits_as_the_reference() -> None:
    norm, pre = BertNormalizer(lowercase=True), BertPreTokenizer()
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        text = f"a{chr(code)}b"
        theirs = norm.normalize_str(text)
        assert normalize(text) == theirs, hex(code)
        assert words(theirs) == [w for w, _ in pre.pre_tokenize_str(theirs)], hex(code)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=400))
def test_any_text_has_the_reference_ids(text: str) -> None:
    ref, ours = _reference(256), _ours(256)
    ref.no_padding()
    assert ours.encode(text) == ref.encode(text).ids
