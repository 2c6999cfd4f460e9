"""Loading the LoCoMo dev conversations (read from ../shared, never shipped) into a store."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from broker import Namespace
from sources import MemoryStore, NewEntry

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CONTEXT_BROKER_SHARED", ROOT.parent / "shared"))
LOCOMO = SHARED / "data" / "locomo" / "locomo-dev.json"
TRIVIAL = SHARED / "data" / "trivial_tasks.txt"
ANSWERABLE = (1, 2, 3, 4)


def require_data() -> None:
    """Exit cleanly with a message when the dev data is absent."""
    if not LOCOMO.exists() or not TRIVIAL.exists():
        sys.stderr.write(f"dev data not found under {SHARED}; skipping\n")
        raise SystemExit(0)


@attrs.frozen(kw_only=True)
class Question:
    """One LoCoMo question with its gold evidence turn ids."""

    conv: str
    text: str
    evidence: frozenset[str]
    category: int


@attrs.frozen(kw_only=True)
class Conversation:
    """One dev conversation: its turns, facts, summaries and questions."""

    sample_id: str
    turns: tuple[tuple[str, str, str], ...]  # (dia_id, speaker, text)
    raw: Any

    @property
    def namespace(self) -> Namespace:
        return Namespace(tenant_id=self.sample_id, project_id="locomo")

    def questions(self, categories: tuple[int, ...] = ANSWERABLE) -> list[Question]:
        out = []
        for qa in self.raw["qa"]:
            if qa["category"] in categories and qa.get("question"):
                out.append(
                    Question(
                        conv=self.sample_id,
                        text=str(qa["question"]),
                        evidence=frozenset(_evidence_ids(qa.get("evidence", []))),
                        category=int(qa["category"]),
                    )
                )
        return out

    def entries(self) -> list[NewEntry]:
        return [
            NewEntry(id=dia, text=text, kind="message", memory_type="episodic")
            for dia, _speaker, text in self.turns
        ]


def _evidence_ids(raw: list[str]) -> Iterator[str]:
    for item in raw:
        # Some evidence strings hold several ids ("D8:6; D9:17").
        for part in str(item).replace(",", ";").split(";"):
            if part.strip():
                yield part.strip()


def turn_text(turn: dict[str, Any]) -> str:
    """A turn as a memory: `{speaker}: {text}`, plus the photo caption when there is one."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def load() -> list[Conversation]:
    """The five dev conversations."""
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    convs = []
    for raw in data:
        conv = raw["conversation"]
        turns = []
        n = 1
        while f"session_{n}" in conv:
            for t in conv[f"session_{n}"]:
                turns.append((t["dia_id"], t["speaker"], turn_text(t)))
            n += 1
        convs.append(Conversation(sample_id=raw["sample_id"], turns=tuple(turns), raw=raw))
    return convs


def trivial_tasks() -> list[str]:
    """Tasks that must recall nothing."""
    return [line.strip() for line in TRIVIAL.read_text(encoding="utf-8").splitlines() if line.strip()]


def build_store(path: Path, convs: list[Conversation]) -> MemoryStore:
    """A store with one tenant per conversation, every turn an episodic memory."""
    store = MemoryStore.open(path)
    for c in convs:
        store.add_entries(c.entries(), namespace=c.namespace, replace=True)
    return store


def foreign_pairs(convs: list[Conversation]) -> list[tuple[Conversation, Conversation]]:
    """(question owner, foreign tenant): each conversation's questions go to the next one."""
    return [(c, convs[(i + 1) % len(convs)]) for i, c in enumerate(convs)]
