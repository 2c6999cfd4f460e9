r"""Recalled and past text made inert: nothing in it can pass for the broker's structure.

The text is cleaned first (`_text.clean`: NFKC, invisible characters removed, controls
replaced, every line break a `\n`), then matched on its skeleton (`_text.skeleton`: each
look-alike as the ASCII character it imitates, case ignored), offset for offset, and
defused where it matches:

- a tag opener before one of our tag names, a role, or a chat-template word (`<memory-`,
  `</past-task`, `<system`, `<<SYS>>`, `</s>`, `<start_of_turn>`, `<instruction>`, `<|...`),
  in ASCII or any look-alike bracket: each `<` of it becomes `&lt;`;
- a square-bracket template marker (`[INST]`, `[/INST]`, `[SYSTEM_PROMPT]`): `[` becomes `&#91;`;
- a line that begins, after any punctuation, with one of our headers (`ACTIVE TASK`,
  `PAST TASK`, `PAST REPLY`, `BROKER NOTE`) or a role header (`system:`, `User:`,
  `### Instruction`, `Assistant (override):`): the line is prefixed `(quoted) `.

Everything else is left as it is, so a normal sentence, a URL or `List<int>` reads unchanged.
The broker's own structure is not recognised by its words but by the turn's nonce, which
recalled text never contains; this step only keeps a forgery from looking right.
"""

from __future__ import annotations

import re

from ._text import clean, skeleton

QUOTED = "(quoted) "
"""Prefix of a recalled line that would otherwise read as a header."""

_FLAGS = re.IGNORECASE | re.ASCII | re.MULTILINE
_SEP = r"[ \t_-]*"


def _loose(phrase: str) -> str:
    """A pattern for `phrase`: words joined by optional separators, `i` and `l` also as each other.

    `I`, `l`, `1` and `|` look alike, and the Unicode data folds some look-alikes of `I` (a
    Greek capital iota) to `l`; so `ACTlVE` and a Greek-lettered `ACTIVE` both match `active`.
    """
    words = ("".join("[il1|]" if c in "il" else re.escape(c) for c in word) for word in phrase.split())
    return _SEP.join(words)


# Tag names after `<`: ours, roles, and the words of chat templates. Prefixes: `memor`
# covers memory, memories and memorules; `sys` covers system and <<SYS>>.
_TAG_WORDS = (
    "memor",
    "past task",
    "active task",
    "persona",
    "consolidated",
    "history",
    "task",
    "broker",
    "sys",
    "user",
    "assistant",
    "developer",
    "tool",
    "function",
    "ipython",
    "human",
    "model",
    "inst",
    "context",
    "prompt",
    "think",
    "turn",
    "message",
    "start_of_turn",
    "end_of_turn",
    "im_start",
    "im_end",
    "endoftext",
    "eot",
    "begin_of_text",
    "start_header",
    "end_header",
)
_TAG_NAMES = "|".join([*map(_loose, _TAG_WORDS), r"[be]os\s*>", r"s\s*>", r"\|"])
_OPENER = re.compile(rf"<+(?=[ \t]*[/!]?[ \t]*(?:{_TAG_NAMES}))", _FLAGS)
_SQUARE_WORDS = ("inst", "sys", "system_prompt", "available_tools", "tool_calls", "tool_results")
_SQUARE = re.compile(rf"\[(?=[ \t]*/?[ \t]*(?:{'|'.join(map(_loose, _SQUARE_WORDS))})[ \t]*\])", _FLAGS)
_OUR_HEADERS = "|".join(
    _loose(h) for h in ("active task", "past task", "current task", "new task", "past reply", "broker note")
)
_ROLES = "|".join(
    _loose(r)
    for r in (
        "system",
        "user",
        "assistant",
        "developer",
        "human",
        "tool",
        "instructions",
        "instruction",
        "response",
    )
)
_QUALIFIER_WORDS = "|".join(
    _loose(q)
    for q in (
        "prompt",
        "message",
        "instructions",
        "instruction",
        "override",
        "note",
        "update",
        "turn",
        "says",
        "said",
    )
)
_QUALIFIER = rf"(?:{_SEP}(?:\([^)\n]{{0,40}}\)|{_QUALIFIER_WORDS}))?"
_HEADER = re.compile(rf"^[^\w\n]*(?:(?:{_OUR_HEADERS})\b|(?:{_ROLES}){_QUALIFIER}[ \t]*(?::|$))", _FLAGS)


def neutralise(text: str) -> str:
    """Return `text` cleaned and defused (see the module docstring); idempotent."""
    cleaned = clean(text)
    shape = skeleton(cleaned)  # same length: an offset in one is the offset in the other
    edits = [(m.start(), m.end(), "&lt;" * len(m.group())) for m in _OPENER.finditer(shape)]
    edits += [(m.start(), m.end(), "&#91;") for m in _SQUARE.finditer(shape)]
    # A header is looked for in both spellings: a symbol the skeleton folds to a letter (U+00D7
    # MULTIPLICATION SIGN to `x`) must not hide the header after it (U+00D7 `### Instruction:`).
    headers = {m.start() for m in _HEADER.finditer(shape)} | {m.start() for m in _HEADER.finditer(cleaned)}
    edits += [(start, start, QUOTED) for start in headers]
    if not edits:
        return cleaned
    edits.sort()
    pieces = []
    at = 0
    for start, end, replacement in edits:
        pieces += [cleaned[at:start], replacement]
        at = end
    pieces.append(cleaned[at:])
    return "".join(pieces)
