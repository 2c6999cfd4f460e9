"""What a kept value costs every full garbage collection: the tracked objects it holds."""

from __future__ import annotations

import gc


def tracked_reachable(root: object) -> int:
    """Objects reachable from `root` (itself included) that a full collection walks, once a
    collection has untracked what it can (tuples of strings and numbers); classes excluded."""
    gc.collect()
    seen, todo = {id(root)}, [root]
    while todo:
        for ref in gc.get_referents(todo.pop()):
            if id(ref) not in seen and gc.is_tracked(ref) and not isinstance(ref, type):
                seen.add(id(ref))
                todo.append(ref)
    return len(seen)
