"""What one read snapshot has read of what cannot change in it: a namespace's id and its write
generation. A turn asks its reads for them a dozen times; each is read once (`ReadOnce`), while
a write, which must see its own changes, reads them every time (`read_once` with None)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

T = TypeVar("T")


@attrs.define(eq=False, slots=True)
class ReadOnce:
    """One read snapshot's values, by key (the engines' `read` makes one per transaction)."""

    _values: dict[Hashable, object] = attrs.field(factory=dict)

    def get(self, key: Hashable, read: Callable[[], T]) -> T:
        """`read()` the first time `key` is asked, its value after."""
        if key not in self._values:
            self._values[key] = read()
        found: T = self._values[key]  # type: ignore[assignment]  # stored by this key's read
        return found


def read_once(snapshot: ReadOnce | None, key: Hashable, read: Callable[[], T]) -> T:
    """`snapshot.get(key, read)`, or `read()` outside a snapshot (a write sees its own changes)."""
    return read() if snapshot is None else snapshot.get(key, read)


__all__ = ["ReadOnce", "read_once"]
