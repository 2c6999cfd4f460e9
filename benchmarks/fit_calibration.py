"""Fit the calibrated relevance scale of each recall mode on the LoCoMo dev conversations.

Positives: (question, gold evidence turn); negatives: the other candidate turns each
question retrieves in its own conversation, and the turns retrieved for another
conversation's questions, and every candidate of an off-topic query
(benchmarks/offtopic_queries.txt: small talk and general knowledge of our own writing, not
the held-out trivial tasks) in every conversation. Candidates are what each mode's recall scores: lexical top-50
(lexical), cosine top-50 (dense), the union of both (hybrid). Because every source scores on
this one scale, the facts (`observation`) and summaries (`session_summary`) the abstraction
and consolidated sources hold are candidates too (their lexical top-50): a fact is a positive
when its turn ids include gold evidence, a summary when its provenance does
(`--turns-only` fits on turns alone). Lexical mode is fitted on turns alone, as the
foundation issue defines it: fitted on facts and summaries too, bare word overlap earns
enough trust that conversational fillers ("good morning", "see you later") cleared the
floor against a dialogue turn sharing their words; in dense and hybrid modes the cosine
tells those apart, and fitting on every corpus there raised the selector's evidence recall. Leave-one-conversation-out
validation reports the expected calibration error (10 bins) per mode; the final fit on all
five conversations is what `--write` puts in sources/_calibration_constants.py.

    python -m benchmarks.fit_calibration [--mode lexical|dense|hybrid|all] [--write]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import attrs
import numpy as np

from sources import MemoryStore, _analysis, _index
from sources import _calibration_constants as current
from sources._relevance import (
    MODES,
    QueryProfile,
    Reference,
    dense_features,
    hybrid_features,
    lexical_features,
)
from sources._schema import CORPUS_ENTRIES, CORPUS_FACTS, CORPUS_KNOWLEDGE

from . import _locomo, _logit
from .load_dev_sources import load_sources

CANDIDATES = 50
OFFTOPIC = tuple(
    line.strip()
    for line in (Path(__file__).parent / "offtopic_queries.txt").read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
)
CONSTANTS = _locomo.ROOT / "sources" / "_calibration_constants.py"
FEATURE_DOC = {
    "lexical": "coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit, specificity, "
    "peak_specificity",
    "dense": "cosine, cosine * presence, presence, log1p(informative query terms), best_cosine_standing",
    "hybrid": "the eight lexical features, cosine, cosine * presence, best_cosine_standing, "
    "best_bm25_standing, bm25_shortfall, coverage_shortfall",
}


@attrs.frozen(kw_only=True)
class Corpus:
    """One corpus of one tenant as the store holds it: rowids, the evidence turn ids each
    document stands for, analysed terms and unit vectors."""

    corpus: int
    index: dict[int, int]  # source rowid -> position
    evidence: tuple[frozenset[str], ...]
    terms: tuple[list[str], ...]
    vectors: np.ndarray

    def dense_top(self, qvec: np.ndarray, k: int) -> dict[int, float]:
        cos = self.vectors @ qvec
        top = np.argsort(-cos, kind="stable")[:k]
        return {int(i): float(cos[i]) for i in top}


@attrs.frozen(kw_only=True)
class Tenant:
    """One conversation in every text corpus the selector scores."""

    conv: _locomo.Conversation
    ns_id: int
    corpora: tuple[Corpus, ...]


_CORPUS_SQL = {
    CORPUS_ENTRIES: "SELECT rowid, text, json_array(id) FROM entries WHERE ns_id = ? ORDER BY rowid",
    CORPUS_FACTS: "SELECT rowid, text, json_extract(metadata, '$.dia_ids') FROM facts WHERE ns_id = ? ORDER BY rowid",
    CORPUS_KNOWLEDGE: "SELECT rowid, text, provenance FROM knowledge WHERE ns_id = ? ORDER BY rowid",
}


def tenants(
    store: MemoryStore, convs: list[_locomo.Conversation], corpora: tuple[int, ...]
) -> dict[str, Tenant]:
    """Every conversation's documents with their vectors (what dense scoring sees)."""
    if store.embedder is None:
        raise SystemExit("the store has no embedder")
    out = {}
    for c in convs:
        with store.db.read() as conn:
            ns_id = _index.find_ns(conn, c.namespace)
            if ns_id is None:
                raise SystemExit(f"{c.sample_id}: not loaded")
            rows = {k: conn.execute(_CORPUS_SQL[k], (ns_id,)).fetchall() for k in corpora}
        built = []
        for k in corpora:
            texts = [r[1] for r in rows[k]]
            built.append(
                Corpus(
                    corpus=k,
                    index={int(r[0]): i for i, r in enumerate(rows[k])},
                    evidence=tuple(frozenset(json.loads(r[2] or "[]")) for r in rows[k]),
                    terms=tuple(_analysis.terms(t) for t in texts),
                    vectors=store.embedder.embed(texts),
                )
            )
        out[c.sample_id] = Tenant(conv=c, ns_id=ns_id, corpora=tuple(built))
    return out


def _lexical_top(store: MemoryStore, prof: QueryProfile, tenant: Tenant, corpus: Corpus) -> list[int]:
    if not prof.present:
        return []
    with store.db.read() as conn:
        rowids = _index.search(
            conn, tenant.ns_id, sorted(prof.present), corpus=corpus.corpus, limit=CANDIDATES
        )
    return [corpus.index[r] for r in rowids]


def _reference(
    store: MemoryStore, mode: str, question: str, tenant: Tenant
) -> tuple[QueryProfile, Reference]:
    """The query's profile and the namespace's reference, exactly as recall computes them."""
    with store.db.read() as conn:
        prof = _index.profile(conn, tenant.ns_id, question)
        return prof, store.scorer_on(conn, tenant.ns_id, prof, question, mode=mode).reference


Rows = list[tuple[frozenset[str], list[float]]]


def candidates(store: MemoryStore, mode: str, question: str, qvec: np.ndarray, tenant: Tenant) -> Rows:
    """(evidence ids, feature vector) of every candidate `mode` scores for a question: the
    store's (lexical, dense or both) and the lexical candidates of facts and summaries, as
    the abstraction and consolidated sources find them."""
    prof, ref = _reference(store, mode, question, tenant)
    if not prof.terms:
        return []
    out: Rows = []
    for corpus in tenant.corpora:
        lex = _lexical_top(store, prof, tenant, corpus)
        if mode == "lexical":
            out += [(corpus.evidence[i], list(lexical_features(prof, corpus.terms[i]).vector())) for i in lex]
            continue
        pool = {i: float(corpus.vectors[i] @ qvec) for i in lex}
        if corpus.corpus == CORPUS_ENTRIES:
            pool.update(corpus.dense_top(qvec, CANDIDATES))
        if mode == "dense":
            out += [(corpus.evidence[i], list(dense_features(prof, c, ref))) for i, c in pool.items()]
        else:
            out += [
                (
                    corpus.evidence[i],
                    list(hybrid_features(prof, lexical_features(prof, corpus.terms[i]), c, ref)),
                )
                for i, c in pool.items()
            ]
    return out


def dataset(
    store: MemoryStore, mode: str, ten: dict[str, Tenant], qvecs: dict[str, np.ndarray]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per conversation: features and labels of every candidate its questions produce."""
    out: dict[str, tuple[list[list[float]], list[float]]] = {k: ([], []) for k in ten}
    convs = [t.conv for t in ten.values()]
    for owner, foreign in _locomo.foreign_pairs(convs):
        xs, ys = out[owner.sample_id]
        for q in owner.questions():
            for evidence, vec in candidates(store, mode, q.text, qvecs[q.text], ten[owner.sample_id]):
                xs.append(vec)
                ys.append(1.0 if evidence & q.evidence else 0.0)
            for _evidence, vec in candidates(store, mode, q.text, qvecs[q.text], ten[foreign.sample_id]):
                xs.append(vec)
                ys.append(0.0)
        for text in OFFTOPIC:
            for _evidence, vec in candidates(store, mode, text, qvecs[text], ten[owner.sample_id]):
                xs.append(vec)
                ys.append(0.0)
    return {k: (np.array(x, dtype=np.float64), np.array(y, dtype=np.float64)) for k, (x, y) in out.items()}


def loco(data: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[float, int, int]:
    """Leave-one-conversation-out ECE, candidates, positives."""
    preds, labels = [], []
    for held in data:
        x = np.vstack([data[k][0] for k in data if k != held])
        y = np.concatenate([data[k][1] for k in data if k != held])
        w, b = _logit.fit(x, y)
        preds.append(_logit.predict(data[held][0], w, b))
        labels.append(data[held][1])
    p, y = np.concatenate(preds), np.concatenate(labels)
    return _logit.ece(p, y), len(y), int(y.sum())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=(*MODES, "all"), default="all")
    parser.add_argument("--write", action="store_true", help="write the fitted constants into the package")
    parser.add_argument(
        "--turns-only", action="store_true", help="fit every mode on conversation turns alone"
    )
    args = parser.parse_args(argv)
    _locomo.require_data()
    convs = _locomo.load()
    modes = MODES if args.mode == "all" else (args.mode,)
    fitted: dict[str, tuple[tuple[float, ...], float]] = {
        "lexical": (current.LEXICAL_WEIGHTS, current.LEXICAL_BIAS),
        "dense": (current.DENSE_WEIGHTS, current.DENSE_BIAS),
        "hybrid": (current.HYBRID_WEIGHTS, current.HYBRID_BIAS),
    }
    with tempfile.TemporaryDirectory() as tmp:
        store = _locomo.build_store(Path(tmp) / "dev.db", convs)
        load_sources(store, convs)
        every = tenants(store, convs, (CORPUS_ENTRIES, CORPUS_FACTS, CORPUS_KNOWLEDGE))
        turns = {k: attrs.evolve(t, corpora=t.corpora[:1]) for k, t in every.items()}
        if store.embedder is None:
            raise SystemExit("the store has no embedder")
        texts = sorted({q.text for c in convs for q in c.questions()} | set(OFFTOPIC))
        qvecs = dict(zip(texts, store.embedder.embed(texts), strict=True))
        for mode in modes:
            ten = turns if args.turns_only or mode == "lexical" else every
            data = dataset(store, mode, ten, qvecs)
            ece, n, pos = loco(data)
            print(f"{mode}: {n} candidates, {pos} positives, LOCO ECE (10 bins) = {ece:.4f}")
            w, b = _logit.fit(
                np.vstack([d[0] for d in data.values()]), np.concatenate([d[1] for d in data.values()])
            )
            print(f"  features: {FEATURE_DOC[mode]}")
            print("  weights:", ", ".join(f"{v:.4f}" for v in w), f"bias: {b:.4f}")
            fitted[mode] = (tuple(float(v) for v in w), b)
        store.close()
    if args.write:
        CONSTANTS.write_text(_render(fitted), encoding="utf-8")
        print(f"wrote {CONSTANTS}", file=sys.stderr)
    return 0


def _render(fitted: dict[str, tuple[tuple[float, ...], float]]) -> str:
    lines = [
        '"""Fitted constants of the calibrated relevance scale, one logistic per recall mode.',
        "",
        "Written by benchmarks/fit_calibration.py on the LoCoMo dev conversations; do not edit by hand.",
        '"""',
        "",
        "from __future__ import annotations",
    ]
    for mode in MODES:
        w, b = fitted[mode]
        name = mode.upper()
        lines += [
            "",
            f"# {mode} features: {FEATURE_DOC[mode]}.",
            f"{name}_WEIGHTS: tuple[float, ...] = (",
            *(f"    {v:.6f}," for v in w),
            ")",
            f"{name}_BIAS: float = {b:.6f}",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
