"""What every CLI command gets: the parsed options, the namespace, the opened store, and
helpers to print results (stdout) and errors (stderr, exit 2)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

import attrs

from broker import ConfigError, Namespace, ValidationError
from context_broker import wiring
from sources import MemoryStore, store_target

EXIT_USAGE = 2
CREATING_COMMANDS = frozenset({"remember", "ingest", "demo"})
"""Commands that may create the database; every other one needs an existing file."""


class UsageError(Exception):
    """A command-line problem reported as lines on stderr with exit status 2."""

    def __init__(self, *lines: str) -> None:
        self.lines = lines
        super().__init__("; ".join(lines))


@attrs.define(eq=False)
class App:
    """Context of one CLI invocation."""

    args: argparse.Namespace
    _store: MemoryStore | None = None
    session_id: str = attrs.field(factory=lambda: str(uuid.uuid4()))
    """This invocation's session: the writer id of a memorule write without --session-id."""

    @property
    def db_path(self) -> Path | str:
        """The store this invocation uses (`--db`, else `$CONTEXT_BROKER_DB`): a SQLite file (a
        path or a `sqlite:///` URL) or a PostgreSQL URL; ConfigError for another scheme, which
        the CLI reports on one line."""
        return store_target(self.args.db) if self.args.db is not None else wiring.default_db_path()

    @property
    def namespace(self) -> Namespace:
        """The namespace from --tenant/--project (normalised; a bad part exits 2, one line each)."""
        try:
            return Namespace(tenant_id=self.args.tenant, project_id=self.args.project)
        except ValidationError as exc:
            flags = {"tenant_id": "--tenant", "project_id": "--project"}
            raise UsageError(
                *(f"error: {flags.get(e.field, e.field)}: {e.message} ({e.code})" for e in exc.errors)
            ) from exc

    @property
    def creates(self) -> bool:
        """May this command create the database? Reading commands never do."""
        return getattr(self.args, "command", None) in CREATING_COMMANDS

    def store(self, *, mode: str | None = None) -> MemoryStore:
        """The store, opened once (StoreError if the file is unusable, or missing for a reader)."""
        if self._store is None:
            if self.creates:
                self.check_store_directory()
            try:
                self._store = wiring.open_store(
                    self.db_path,
                    mode=mode or getattr(self.args, "mode", None),
                    create=self.creates,
                    durability=getattr(self.args, "durability", "normal"),
                )
            except ConfigError as exc:
                raise UsageError(f"error: {exc}") from exc
        return self._store

    def check_store_directory(self) -> None:
        """Refuse to create a store named by `--db` or `$CONTEXT_BROKER_DB` outside a directory.

        For a command that may create the store: a mistyped path never makes directories and a
        new, empty store (UsageError, nothing made); the default path, under the user's data
        directory, is made on first use.
        """
        named = self.args.db is not None or bool(os.environ.get(wiring.ENV_DB))
        path = self.db_path
        if not (named and isinstance(path, Path)):
            return
        path = path.expanduser()
        if path.exists():
            return
        parent = path.parent
        if parent.exists() and not parent.is_dir():
            raise UsageError(f"error: {path}: {parent} is not a directory (nothing was written)")
        if not parent.exists():
            raise UsageError(f"error: {path}: no directory {parent} (create it first; nothing was written)")

    def close(self) -> None:
        """Close what was opened."""
        if self._store is not None:
            self._store.close()
            self._store = None

    @staticmethod
    def print_json(value: object) -> None:
        """One JSON document on stdout, flushed (a reader of a pipe sees each as it is printed)."""
        sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    @staticmethod
    def out(text: str) -> None:
        """A line of result on stdout."""
        sys.stdout.write(text + "\n")
