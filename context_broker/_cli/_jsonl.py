"""Reading the line files commands take (`ingest`, `select --batch`, `trace-stats`): a path, or
`-` for standard input; UTF-8, with or without a byte-order mark; split on newlines only.

A line that is not UTF-8 is reported by number (a latin-1 export, say), never as a traceback
or a byte offset into the whole file.
"""

from __future__ import annotations

import codecs
import json
import sys
from pathlib import Path
from typing import Any

from ._app import UsageError

STDIN = "-"
_MAX_REPORTED = 10


def label(name: str) -> str:
    """How errors name the input: the path, or `standard input`."""
    return "standard input" if name == STDIN else name


def read_lines(name: str) -> list[tuple[int, str]]:
    """The file's (or standard input's) non-blank lines with their 1-based numbers."""
    try:
        data = sys.stdin.buffer.read() if name == STDIN else Path(name).expanduser().read_bytes()
    except OSError as exc:
        raise UsageError(f"error: {name}: {exc.strerror or exc}") from exc
    data = data.removeprefix(codecs.BOM_UTF8)
    lines: list[tuple[int, str]] = []
    errors: list[str] = []
    # Split on b"\n" only: str.splitlines would also split inside JSON strings at U+2028 and friends.
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(
                f"error: {label(name)}: line {number}: not UTF-8 (byte 0x{raw[exc.start]:02x} at "
                f"column {exc.start + 1})"
            )
            continue
        if line.strip():
            lines.append((number, line.removesuffix("\r")))
    if errors:
        more = len(errors) - _MAX_REPORTED
        tail = [f"error: {label(name)}: {more} more lines are not UTF-8"] if more > 0 else []
        raise UsageError(*errors[:_MAX_REPORTED], *tail, f"error: {label(name)}: save it as UTF-8")
    return lines


def read_text(name: str) -> str:
    """The whole file (or standard input) as text, one trailing line break removed."""
    try:
        data = sys.stdin.buffer.read() if name == STDIN else Path(name).expanduser().read_bytes()
    except OSError as exc:
        raise UsageError(f"error: {name}: {exc.strerror or exc}") from exc
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"error: {label(name)}: not UTF-8 (byte 0x{data[exc.start]:02x}); save it as UTF-8"
        raise UsageError(msg) from exc
    return text.removesuffix("\n").removesuffix("\r")


def decode_problem(exc: json.JSONDecodeError) -> str:
    """What the decoder found and where: "Unterminated string starting at column 7"."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def json_object(line: str) -> tuple[dict[str, Any] | None, list[str]]:
    """A line as a JSON object, or (None and) the problem with it."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, [f"invalid JSON ({decode_problem(exc)})"]
    if not isinstance(obj, dict):
        return None, ["must be a JSON object"]
    return obj, []
