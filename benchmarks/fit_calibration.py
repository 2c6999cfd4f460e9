"""Fit the calibrated relevance scale of each recall mode on the LoCoMo dev conversations.

Positives: (question, gold evidence turn); negatives: the other candidate turns each
question retrieves in its own conversation, and the turns retrieved for another
conversation's questions. Candidates are what each mode's recall scores: lexical top-50
(lexical), cosine top-50 (dense), the union of both (hybrid). Leave-one-conversation-out
validation reports the expected calibration error (10 bins) per mode; the final fit on all
five conversations is what `--write` puts in sources/_calibration_constants.py.

    python -m benchmarks.fit_calibration [--mode lexical|dense|hybrid|all] [--write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import attrs
import numpy as np

from sources import MemoryStore, _analysis, _index
from sources import _calibration_constants as current
from sources._relevance import MODES, QueryProfile, dense_features, hybrid_features, lexical_features
from sources._store import MemoryStore as _Store

from . import _locomo, _logit

CANDIDATES = 50
CONSTANTS = _locomo.ROOT / "sources" / "_calibration_constants.py"
FEATURE_DOC = {
    "lexical": "coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit",
    "dense": "cosine, cosine * presence, presence, log1p(informative query terms)",
    "hybrid": "the six lexical features, cosine, cosine * presence",
}


@attrs.frozen(kw_only=True)
class Tenant:
    """One conversation as the store holds it: ids, analysed terms and unit vectors of its turns."""

    conv: _locomo.Conversation
    ids: tuple[str, ...]
    terms: tuple[list[str], ...]
    vectors: np.ndarray

    def dense_top(self, qvec: np.ndarray, k: int) -> dict[int, float]:
        cos = self.vectors @ qvec
        top = np.argsort(-cos, kind="stable")[:k]
        return {int(i): float(cos[i]) for i in top}


def tenants(store: MemoryStore, convs: list[_locomo.Conversation]) -> dict[str, Tenant]:
    """Return every conversation's turns with their vectors (what dense recall sees)."""
    if store.embedder is None:
        raise SystemExit("the store has no embedder")
    out = {}
    for c in convs:
        ids = tuple(t[0] for t in c.turns)
        texts = [t[2] for t in c.turns]
        out[c.sample_id] = Tenant(
            conv=c,
            ids=ids,
            terms=tuple(_analysis.terms(t) for t in texts),
            vectors=store.embedder.embed(texts),
        )
    return out


def _lexical_top(store: MemoryStore, question: str, tenant: Tenant) -> tuple[QueryProfile, list[int]]:
    with store.db.read() as conn:
        ns_id = _index.find_ns(conn, tenant.conv.namespace)
        prof = _index.profile(conn, ns_id, question)
        if ns_id is None or not prof.present:
            return prof, []
        rows = _Store._lexical_rows(conn, ns_id, prof, None, CANDIDATES)
    pos = {dia: i for i, dia in enumerate(tenant.ids)}
    return prof, [pos[r[1]] for r in rows]


Rows = list[tuple[str, list[float]]]


def candidates(store: MemoryStore, mode: str, question: str, qvec: np.ndarray, tenant: Tenant) -> Rows:
    """(turn id, feature vector) of every candidate `mode`'s recall scores for a question."""
    prof, lex = _lexical_top(store, question, tenant)
    if not prof.terms:
        return []
    if mode == "lexical":
        return [(tenant.ids[i], list(lexical_features(prof, tenant.terms[i]).vector())) for i in lex]
    dense = tenant.dense_top(qvec, CANDIDATES)
    if mode == "dense":
        return [(tenant.ids[i], list(dense_features(prof, c))) for i, c in dense.items()]
    pool = dict(dense)
    for i in lex:
        pool.setdefault(i, float(tenant.vectors[i] @ qvec))
    return [
        (tenant.ids[i], list(hybrid_features(prof, lexical_features(prof, tenant.terms[i]), c)))
        for i, c in pool.items()
    ]


def dataset(
    store: MemoryStore, mode: str, ten: dict[str, Tenant], qvecs: dict[str, np.ndarray]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per conversation: features and labels of every candidate its questions produce."""
    out: dict[str, tuple[list[list[float]], list[float]]] = {k: ([], []) for k in ten}
    convs = [t.conv for t in ten.values()]
    for owner, foreign in _locomo.foreign_pairs(convs):
        xs, ys = out[owner.sample_id]
        for q in owner.questions():
            for dia, vec in candidates(store, mode, q.text, qvecs[q.text], ten[owner.sample_id]):
                xs.append(vec)
                ys.append(1.0 if dia in q.evidence else 0.0)
            for _dia, vec in candidates(store, mode, q.text, qvecs[q.text], ten[foreign.sample_id]):
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
        ten = tenants(store, convs)
        if store.embedder is None:
            raise SystemExit("the store has no embedder")
        texts = sorted({q.text for c in convs for q in c.questions()})
        qvecs = dict(zip(texts, store.embedder.embed(texts), strict=True))
        for mode in modes:
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
