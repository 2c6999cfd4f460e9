"""benchmarks.candidates (named apart from tests/broker/test_candidates.py): every default source's candidates dumped, and two dumps compared."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from benchmarks import candidates

if TYPE_CHECKING:
    from pathlib import Path


def test_a_dump_matches_itself_and_a_changed_score_or_id_is_reported(tmp_path: Path, capsys) -> None:
    """Two dumps of one store agree (exit 0); a score moved past 1e-12 or a missing row exits 1."""
    out = tmp_path / "a.json"
    assert candidates.main(["--out", str(out), "--n", "1500", "--tasks", "12", "--db", str(tmp_path)]) == 0
    again = tmp_path / "b.json"
    assert candidates.main(["--out", str(again), "--n", "1500", "--tasks", "12", "--db", str(tmp_path)]) == 0
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert len(rows) == 12 * 8  # eight sources a task
    assert any(row[2] for row in rows)  # some source found something
    assert candidates.main(["--compare", str(out), str(again)]) == 0
    moved = [list(r) for r in rows]
    i = next(i for i, r in enumerate(moved) if r[2])
    moved[i] = [moved[i][0], moved[i][1], [[moved[i][2][0][0], moved[i][2][0][1] + 1e-9], *moved[i][2][1:]]]
    changed = tmp_path / "c.json"
    changed.write_text(json.dumps(moved), encoding="utf-8")
    assert candidates.main(["--compare", str(out), str(changed)]) == 1
    changed.write_text(json.dumps(rows[:-1]), encoding="utf-8")
    assert candidates.main(["--compare", str(out), str(changed)]) == 1
    assert "rows differ" in capsys.readouterr().out


def test_a_missing_or_foreign_file_is_a_usage_error_not_a_traceback(tmp_path: Path, capsys) -> None:
    """--compare of a missing file, of a non-JSON file or of other JSON exits 2 with the reason."""
    good = tmp_path / "good.json"
    good.write_text("[]", encoding="utf-8")
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}', encoding="utf-8")
    for bad, reason in ((tmp_path / "absent.json", "cannot read it"), (text, "not JSON"), (other, "rows of")):
        with pytest.raises(SystemExit) as exited:
            candidates.main(["--compare", str(good), str(bad)])
        assert exited.value.code == 2
        assert reason in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        candidates.main([])  # neither --out nor --compare
    assert exited.value.code == 2


def test_a_floor_out_of_range_exits_2_with_the_reason(tmp_path: Path, capsys) -> None:
    """--min-score above RECALL_MIN_SCORE, under 0 or not a number exits 2 saying so, before any
    store is built, and writes no dump."""
    out = tmp_path / "a.json"
    for bad in ("0.9", "-0.1", "nan", "abc"):
        with pytest.raises(SystemExit) as exited:
            candidates.main(
                ["--out", str(out), "--n", "1500", "--tasks", "2", "--db", str(tmp_path), "--min-score", bad]
            )
        assert exited.value.code == 2
        assert "--min-score" in capsys.readouterr().err
    assert not out.exists()
    assert not list(tmp_path.glob("*.db"))  # no store was built for a bad flag
