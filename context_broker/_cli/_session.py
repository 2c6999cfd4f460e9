"""Who is asking and who is writing: the session context of `select`, `recall` and `demo`, and
the writer every memorule write records.

A reading command's `--persona`, `--surface` and `--specialization` build the
`SessionContext` that memorules are ranked against (none given: no context). A memorule
write always names its writer: the persona from `--persona`, else `$CONTEXT_BROKER_PERSONA`
(an error, exit 2, when neither is set), and the session id from `--session-id`, else one
fresh id per invocation (`App.session_id`), so the audit trail never holds an anonymous rule.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from broker import FieldError, SessionContext
from context_broker.wiring import ENV_PERSONA
from sources import WriterSession, session_errors

if TYPE_CHECKING:
    import argparse

_CONTEXT_KEYS = ("persona", "surface", "specialization")


def add_context_arguments(p: argparse.ArgumentParser) -> None:
    """--persona, --surface, --specialization: the session memorules are ranked against."""
    group = p.add_argument_group("session context (memorules that fit it rank first)")
    group.add_argument("--persona", help="the session's persona")
    group.add_argument("--surface", help="the session's surface (chat, cli, ...)")
    group.add_argument("--specialization", help="the session's specialization")


def session_context(args: argparse.Namespace) -> SessionContext | None:
    """The SessionContext of the flags given (None: none given)."""
    given = {k: getattr(args, k) for k in _CONTEXT_KEYS if getattr(args, k, None) is not None}
    return SessionContext(**given) if given else None


def add_writer_arguments(p: argparse.ArgumentParser) -> None:
    """--session-id and --persona: the writer of a memorule write."""
    p.add_argument("--session-id", help="the writing session (default: a new id for this invocation)")
    p.add_argument(
        "--persona",
        help=f"the persona writing memorules (default: ${ENV_PERSONA}; "
        "required for a memorule that names no writer)",
    )


def writer_session(
    session_id: str | None, persona: str | None, *, derived_id: str
) -> tuple[WriterSession | None, list[FieldError]]:
    """The writer of a memorule write: `persona` (else `$CONTEXT_BROKER_PERSONA`) and
    `session_id` (else `derived_id`); a field error when no persona is available."""
    if persona is None:
        persona = os.environ.get(ENV_PERSONA) or None
    if persona is None:
        return None, [
            FieldError(
                field="persona",
                code="required",
                message=f"a memorule write names its writer: give --persona or set ${ENV_PERSONA}",
            )
        ]
    session = WriterSession(session_id=derived_id if session_id is None else session_id, persona=persona)
    return session, session_errors(session)
