"""Load the LoCoMo dev conversations into every memory source, one tenant per conversation.

- turns -> `store` entries (episodic, id = dia_id; `_locomo.build_store` writes them, or pass
  `turns=True`);
- `observation` sentences -> `abstraction` facts, with their dia_id(s) in metadata;
- `session_summary` -> `consolidated` knowledge, provenance = that session's dia_ids;
- the two speakers and the capitalised names in the observations -> `graphs` nodes, with an
  edge `speaker -mentions-> name` for each name a speaker's observations mention (the node's
  description is the first observation that mentions it).

Run alone, it loads a fresh store and prints what each source holds; with --measure it
also prints, per source and for the floor-select-cap of all of them (budget 40, as the
selector does): evidence recall on answerable questions (categories 1-4), and abstention
rates on them, on trivial tasks and on foreign questions (asked of another tenant):
    python -m benchmarks.load_dev_sources [--db PATH] [--mode lexical|dense|hybrid] [--measure]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from benchmarks import _locomo
from broker import (
    RECALL_MIN_SCORE,
    Candidate,
    EstimatingTokenCounter,
    Namespace,
    SelectedBlock,
    ValidationError,
)
from broker._floor import select
from broker.abc import Source, SourceRequest
from sources import DEFAULT_SOURCES, MemoryStore, NewFact, Writers, default_sources
from sources.storage._analysis import STOP_WORDS
from sources.storage._graph_walk import MAX_KEY_TERMS, key_of

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

# Capitalised runs ("Pride Parade", "LGBTQ", "Melanie's"): a name candidate each.
_CAPITALISED = re.compile(r"\b[A-Z][\w\-]*(?:\s+[A-Z][\w\-]*)*")
# Capitalised words that are not entities in these conversations.
_NOT_NAMES = frozenset(
    (
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "during",
        "since",
        "recently",
        "last",
        "next",
        "today",
        "tomorrow",
        "yesterday",
        "later",
    )
)


def load_sources(
    store: MemoryStore, convs: list[_locomo.Conversation], *, turns: bool = False
) -> dict[str, int]:
    """Write the conversations' facts, summaries and entity graph into `store`; return counts."""
    counts = {"entries": 0, "facts": 0, "knowledge": 0, "nodes": 0, "edges": 0}
    writers = Writers.for_store(store)
    for conv in convs:
        ns = conv.namespace
        if turns:
            counts["entries"] += len(store.add_entries(conv.entries(), namespace=ns, replace=True))
        facts = list(_facts(conv.raw))
        counts["facts"] += len(writers.facts.add_facts(facts, namespace=ns, replace=True))
        for sid, text, provenance in _summaries(conv.raw):
            writers.knowledge.add_knowledge(text, namespace=ns, provenance=provenance, id=sid, replace=True)
            counts["knowledge"] += 1
        nodes, edges = _graph(writers, ns, conv.raw, facts)
        counts["nodes"] += nodes
        counts["edges"] += edges
    return counts


def _facts(raw: Mapping[str, Any]) -> Iterator[NewFact]:
    for session, by_speaker in raw["observation"].items():
        for speaker, items in by_speaker.items():
            for i, (sentence, dia) in enumerate(items):
                dia_ids = [dia] if isinstance(dia, str) else list(dia)
                yield NewFact(
                    text=sentence,
                    id=f"{session}:{speaker}:{i}",
                    metadata={"dia_id": dia_ids[0], "dia_ids": dia_ids, "speaker": speaker},
                )


def _summaries(raw: Mapping[str, Any]) -> Iterator[tuple[str, str, list[str]]]:
    conv = raw["conversation"]
    for key, text in raw["session_summary"].items():
        n = key.removeprefix("session_").removesuffix("_summary")
        provenance = [t["dia_id"] for t in conv.get(f"session_{n}", [])]
        if provenance and text.strip():
            yield key, text, provenance


def names_in(sentence: str, speakers: set[str]) -> list[str]:
    """Return the capitalised names a sentence mentions, other than the speakers."""
    out: list[str] = []
    for match in _CAPITALISED.finditer(sentence):
        words = [w.removesuffix("'s") for w in match.group(0).split()]
        if match.start() == 0 and len(words) == 1 and not words[0].isupper():
            continue  # a capitalised first word is grammar, not a name (speakers are known)
        while words and (words[0].lower() in STOP_WORDS or words[0].lower() in _NOT_NAMES):
            words = words[1:]
        name = " ".join(words)
        key = key_of(name)
        if not key or name in speakers or len(key.split()) > MAX_KEY_TERMS or name in out:
            continue
        out.append(name)
    return out


def _graph(writers: Writers, ns: Namespace, raw: Mapping[str, Any], facts: list[NewFact]) -> tuple[int, int]:
    conv = raw["conversation"]
    speakers = {conv["speaker_a"], conv["speaker_b"]}
    described: dict[str, str] = {}
    edges: set[tuple[str, str]] = set()
    for fact in facts:
        speaker = str((fact.metadata or {}).get("speaker", ""))
        for name in names_in(fact.text or "", speakers):
            described.setdefault(name, fact.text or "")
            if speaker in speakers:
                edges.add((speaker, name))
    nodes = 0
    for name in sorted(speakers):
        writers.graphs.add_node(name, namespace=ns, id=_node_id(name), description="", replace=True)
        nodes += 1
    for name, description in sorted(described.items()):
        try:
            writers.graphs.add_node(
                name, namespace=ns, id=_node_id(name), description=description, replace=True
            )
        except ValidationError:
            continue  # a name the graph cannot key (e.g. too long once analysed)
        nodes += 1
    added = sum(
        writers.graphs.add_edge(_node_id(s), "mentions", _node_id(n), namespace=ns) for s, n in sorted(edges)
    )
    return nodes, added


CURVE_FLOORS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.42)
_COUNTER = EstimatingTokenCounter()


def _node_id(name: str) -> str:
    return f"entity:{name}"


def evidence_ids(block: SelectedBlock) -> set[str]:
    """Return the dia_ids a selected memory stands for (its own, or those it summarises)."""
    if block.entry_id.startswith("fact:"):
        meta = block.metadata.get("metadata", {})
        return set(meta.get("dia_ids", []))
    if block.entry_id.startswith("knowledge:"):
        return set(block.metadata.get("provenance", []))
    if block.entry_id.startswith("graph:"):
        return set()
    return {block.entry_id}


@attrs.define
class _Tally:
    """Per-source (and selected) counts over one kind of question."""

    asked: int = 0
    abstained: dict[str, int] = attrs.field(factory=dict)
    hit: dict[str, int] = attrs.field(factory=dict)
    injected: int = 0  # selected memories, tokens, and selected memories covering no evidence
    tokens: int = 0
    off: int = 0

    def add(self, name: str, *, abstained: bool, hit: bool) -> None:
        self.abstained[name] = self.abstained.get(name, 0) + abstained
        self.hit[name] = self.hit.get(name, 0) + hit


async def _ask(  # noqa: PLR0917 - one call site, each argument named
    sources: list[Source],
    task: str,
    ns: Namespace,
    evidence: frozenset[str],
    tally: _Tally,
    curve: dict[float, _Tally],
) -> None:
    """Ask every source, then select as the selector does (one floor, dedupe, budget 40);
    with `curve`, also select at each of its floors."""
    tally.asked += 1
    everything: list[Candidate] = []
    for src in sources:
        got = list(await src.fetch(SourceRequest(task=task, namespace=ns, limit=40)))
        everything += got
        kept = [c for c in got if c.score >= RECALL_MIN_SCORE]
        found = set().union(*(evidence_ids(SelectedBlock.from_candidate(c, (c.source,))) for c in kept))
        tally.add(src.name, abstained=not kept, hit=bool(found & evidence))
    blocks = select(everything, budget=40)
    found = set().union(*(evidence_ids(b) for b in blocks))
    tally.add("selected", abstained=not blocks, hit=bool(found & evidence))
    tally.injected += len(blocks)
    tally.tokens += sum(_COUNTER.count(b.text) for b in blocks)
    tally.off += sum(1 for b in blocks if not evidence_ids(b) & evidence)
    for floor, at in curve.items():
        at.asked += 1
        blocks = select(everything, budget=40, floor=floor)
        found = set().union(*(evidence_ids(b) for b in blocks))
        at.add("selected", abstained=not blocks, hit=bool(found & evidence))


Curve = dict[str, dict[float, _Tally]]


async def measure(
    store: MemoryStore, convs: list[_locomo.Conversation], floors: tuple[float, ...] = ()
) -> tuple[dict[str, _Tally], Curve]:
    """Per-source and selected rates on answerable, trivial and foreign questions, and the
    selected rates at each of `floors` (every source's own floor lowered to the lowest)."""
    sources = default_sources(store, min_score=min((*floors, RECALL_MIN_SCORE)))
    for src in sources:
        await src.open()
    kinds = ("answerable", "trivial", "foreign")
    out = {k: _Tally() for k in kinds}
    curve: Curve = {k: {f: _Tally() for f in floors} for k in kinds}
    for owner, foreign in _locomo.foreign_pairs(convs):
        for q in owner.questions():
            await _ask(sources, q.text, owner.namespace, q.evidence, out["answerable"], curve["answerable"])
            await _ask(sources, q.text, foreign.namespace, frozenset(), out["foreign"], curve["foreign"])
        for task in _locomo.trivial_tasks():
            await _ask(sources, task, owner.namespace, frozenset(), out["trivial"], curve["trivial"])
    for src in sources:
        await src.aclose()
    return out, curve


def _report_curve(curve: Curve) -> None:
    print("floor   evidence  false-abstention  trivial-abstention  foreign-abstention")
    for floor in sorted(curve["answerable"]):
        a, t, f = (curve[k][floor] for k in ("answerable", "trivial", "foreign"))
        print(
            f"{floor:<7.2f} {a.hit['selected'] / a.asked:>8.3f} {a.abstained['selected'] / a.asked:>17.3f} "
            f"{t.abstained['selected'] / t.asked:>19.3f} {f.abstained['selected'] / f.asked:>19.3f}"
        )


def _report(out: dict[str, _Tally]) -> None:
    names = [*DEFAULT_SOURCES, "selected"]
    print(f"{'':12}" + "".join(f"{n:>13}" for n in names))
    a, t, f = out["answerable"], out["trivial"], out["foreign"]
    rows = {
        "evidence": [a.hit.get(n, 0) / a.asked for n in names],
        "abstain-ans": [a.abstained.get(n, 0) / a.asked for n in names],
        "abstain-triv": [t.abstained.get(n, 0) / t.asked for n in names],
        "abstain-for": [f.abstained.get(n, 0) / f.asked for n in names],
    }
    for label, values in rows.items():
        print(f"{label:12}" + "".join(f"{v:>13.3f}" for v in values))
    print(f"questions: answerable={a.asked} trivial={t.asked} foreign={f.asked}")
    print(
        f"answerable turns: {a.injected / a.asked:.1f} memories and {a.tokens / a.asked:.0f} tokens selected "
        f"on average; {a.off / max(a.injected, 1):.3f} of the selected memories cover no evidence"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="store file (default: a temporary file)")
    parser.add_argument("--mode", choices=("lexical", "dense", "hybrid"), default="hybrid")
    parser.add_argument("--measure", action="store_true", help="print per-source rates on the dev questions")
    parser.add_argument(
        "--curve",
        action="store_true",
        help="with --measure: also the selected rates at lower floors (the trade-off the one floor fixes)",
    )
    args = parser.parse_args()
    if args.curve and not args.measure:
        parser.error("--curve needs --measure")
    _locomo.require_data()
    convs = _locomo.load()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "dev.db"
        store = MemoryStore.open(path, mode=args.mode)
        try:
            counts = load_sources(store, convs, turns=True)
            print(" ".join(f"{k}={v}" for k, v in counts.items()))
            if args.measure:
                out, curve = anyio.run(measure, store, convs, CURVE_FLOORS if args.curve else ())
                _report(out)
                if args.curve:
                    _report_curve(curve)
        finally:
            store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
