"""Fit the calibrated relevance scale on the LoCoMo dev conversations.

Positives: (question, gold evidence turn); negatives: the other turns each question's
lexical search retrieves in its own conversation, and the turns retrieved for another
conversation's questions. Leave-one-conversation-out validation reports the expected
calibration error; the final fit on all five writes sources/_calibration_constants.py.

    python -m benchmarks.fit_calibration [--write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from sources import MemoryStore, _analysis, _index
from sources._relevance import lexical_features
from sources._store import MemoryStore as _Store

from . import _locomo, _logit

CANDIDATES = 50
CONSTANTS = _locomo.ROOT / "sources" / "_calibration_constants.py"


def _rows(store: MemoryStore, question: str, tenant: _locomo.Conversation) -> list[tuple[str, list[float]]]:
    with store.db.read() as conn:
        ns_id = _index.find_ns(conn, tenant.namespace)
        prof = _index.profile(conn, ns_id, question)
        if ns_id is None or not prof.present:
            return []
        rows = _Store._lexical_rows(conn, ns_id, prof, None, CANDIDATES)  # noqa: SLF001
    return [(r[1], list(lexical_features(prof, _analysis.terms(r[6])).vector())) for r in rows]


def dataset(store: MemoryStore, convs: list[_locomo.Conversation]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per conversation: features and labels of every candidate its questions produce."""
    out: dict[str, tuple[list[list[float]], list[float]]] = {c.sample_id: ([], []) for c in convs}
    for owner, foreign in _locomo.foreign_pairs(convs):
        xs, ys = out[owner.sample_id]
        for q in owner.questions():
            for dia, vec in _rows(store, q.text, owner):
                xs.append(vec)
                ys.append(1.0 if dia in q.evidence else 0.0)
            for _dia, vec in _rows(store, q.text, foreign):
                xs.append(vec)
                ys.append(0.0)
    return {k: (np.array(x, dtype=np.float64), np.array(y, dtype=np.float64)) for k, (x, y) in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write the fitted constants into the package")
    args = parser.parse_args(argv)
    _locomo.require_data()
    convs = _locomo.load()
    with tempfile.TemporaryDirectory() as tmp:
        store = _locomo.build_store(Path(tmp) / "dev.db", convs)
        data = dataset(store, convs)
        store.close()
    preds, labels = [], []
    for held in data:
        x = np.vstack([data[k][0] for k in data if k != held])
        y = np.concatenate([data[k][1] for k in data if k != held])
        w, b = _logit.fit(x, y)
        preds.append(_logit.predict(data[held][0], w, b))
        labels.append(data[held][1])
    p, y = np.concatenate(preds), np.concatenate(labels)
    print(f"lexical: {len(y)} candidates, {int(y.sum())} positives, LOCO ECE (10 bins) = {_logit.ece(p, y):.4f}")
    x_all = np.vstack([d[0] for d in data.values()])
    y_all = np.concatenate([d[1] for d in data.values()])
    w, b = _logit.fit(x_all, y_all)
    print("weights:", ", ".join(f"{v:.4f}" for v in w), f"bias: {b:.4f}")
    if args.write:
        CONSTANTS.write_text(_render(w, b), encoding="utf-8")
        print(f"wrote {CONSTANTS}", file=sys.stderr)
    return 0


def _render(w: np.ndarray, b: float) -> str:
    weights = ", ".join(f"{v:.6f}" for v in w)
    return (
        '"""Fitted constants of the calibrated relevance model (written by\n'
        'benchmarks/fit_calibration.py on the LoCoMo dev conversations; do not edit by hand)."""\n\n'
        "from __future__ import annotations\n\n"
        "# Features: coverage, bm25_norm, log1p(matched), log1p(unmatched), presence, rarest_hit.\n"
        f"LEXICAL_WEIGHTS: tuple[float, ...] = ({weights})\n"
        f"LEXICAL_BIAS: float = {b:.6f}\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
