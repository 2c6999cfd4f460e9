"""Memorule commands: `audit`, `memorule update|delete|history`, and `remember`'s arguments.

`add_remember_arguments` and `remember_command` are what the store commands' `remember`
delegates to (notes and memorules).

Every memorule flag is optional to argparse and validated here, so one invocation reports
every invalid or missing field at once (one `error: <field>: <message> (<code>)` line each,
exit 2) instead of stopping at the first missing flag. Every memorule write names its writer
(`_session.writer_session`): the persona is required, the session id derived when not given.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from broker import FieldError, ValidationError, printable
from sources import (
    WriterSession,
    audit_events,
    delete_memorule,
    memorule_errors,
    memorule_history,
    remember,
    remember_errors,
    update_memorule,
)

from ._jsonl import STDIN, read_text
from ._session import add_writer_arguments, writer_session

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from sources import AuditEvent

    from ._app import App

EXIT_NOT_FOUND = 2
"""An unknown memorule id is bad input, as for `memorule update` (and every other bad input)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `audit` and `memorule` (update, delete, history)."""
    p = sub.add_parser("audit", help="memorule audit events of the tenant, oldest first")
    p.add_argument("--since", help="only events written at or after this ISO-8601 time")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.set_defaults(handler=audit)

    p = sub.add_parser("memorule", help="update, delete or show the history of a memorule")
    actions = p.add_subparsers(dest="memorule_command", required=True, metavar="ACTION")
    u = actions.add_parser("update", help="append a new state (given fields change); prints the id")
    u.add_argument("id")
    _add_memorule_arguments(u)
    _add_session_arguments(u)
    u.set_defaults(handler=update)

    d = actions.add_parser("delete", help="delete a memorule (its audit events stay)")
    d.add_argument("id")
    d.add_argument("--evidence-signal-id", help="the signal that prompted the deletion")
    _add_session_arguments(d)
    d.set_defaults(handler=delete)

    h = actions.add_parser("history", help="every state of a memorule, oldest first")
    h.add_argument("id")
    h.add_argument("--json", action="store_true", help="print a JSON array")
    h.set_defaults(handler=history)


def add_remember_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of `remember`: a note's text, or a memorule's fields."""
    parser.add_argument(
        "text",
        nargs="?",
        metavar="TEXT",
        help="the note's text, or the memorule's body (\"-\": standard input)",
    )
    parser.add_argument("--kind", default="note", help="note (default), memorule, or another store kind")
    parser.add_argument(
        "--memory-type", help="episodic, semantic, procedural, self, personality, associative"
    )
    parser.add_argument(
        "--id",
        help="the id to write under (default: a note gets one derived from its text, a memorule a new uuid)",
    )
    parser.add_argument("--importance", help="a number in [0, 1] (default: 0.5)")
    _add_memorule_arguments(parser)
    _add_session_arguments(parser)


def _add_memorule_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memorule-kind", help="behavioral_rule, feedback, preference, correction or convention")
    p.add_argument("--subject", help="the rule in a few words (at least 4 characters)")
    p.add_argument("--body", help="the full text (at least 10 characters)")
    p.add_argument(
        "--applies-to",
        action="append",
        metavar="KEY=VALUE",
        help="persona, surface, specialization or scope (global, org, project, persona); repeatable",
    )
    p.add_argument("--confidence", help="observed, inferred (default) or asserted")
    p.add_argument("--evidence-signal-id", help="the signal, postmortem or delta that prompted it")


def _add_session_arguments(p: argparse.ArgumentParser) -> None:
    add_writer_arguments(p)


# -- parsing what argparse leaves as strings ------------------------------------------------


def parse_applies_to(raw: Sequence[str] | None) -> tuple[dict[str, str] | None, list[FieldError]]:
    """`key=value` flags as a dict (None when no flag was given), and their format errors."""
    if raw is None:
        return None, []
    out: dict[str, str] = {}
    errors = []
    for item in raw:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            errors.append(
                FieldError(
                    field="applies_to", code="invalid_format", message=f"expected KEY=VALUE, got {item!r}"
                )
            )
        elif key in out:
            errors.append(
                FieldError(field="applies_to", code="duplicate", message=f"key {key!r} given twice")
            )
        else:
            out[key] = value
    return out, errors


def parse_session(args: argparse.Namespace, app: App) -> tuple[WriterSession | None, list[FieldError]]:
    """The writer of this invocation's memorule write (`_session.writer_session`)."""
    return writer_session(args.session_id, args.persona, derived_id=app.session_id)


def _note_errors(args: argparse.Namespace) -> list[FieldError]:
    """A note has no writer: a writer flag given with one is refused."""
    return [
        FieldError(field=f, code="not_allowed", message="is only accepted with kind 'memorule'")
        for f in ("session_id", "persona")
        if getattr(args, f) is not None
    ]


def _parse_importance(raw: str | None) -> tuple[float, list[FieldError]]:
    if raw is None:
        return 0.5, []
    try:
        return float(raw), []
    except ValueError:
        return 0.5, [FieldError(field="importance", code="type", message=f"must be a number, got {raw!r}")]


def _without_required(errors: list[FieldError], field: str) -> list[FieldError]:
    """Drop `field: required` when the flag was given but none of its values parsed."""
    return [e for e in errors if not (e.field == field and e.code in {"required", "empty"})]


# -- handlers -------------------------------------------------------------------------------


def remember_command(args: argparse.Namespace, app: App) -> int:
    """Write a note or a memorule; print its id. Every field error at once, exit 2."""
    applies_to, errors = parse_applies_to(args.applies_to)
    session, writer_errors = (
        parse_session(args, app) if args.kind == "memorule" else (None, _note_errors(args))
    )
    importance, errs = _parse_importance(args.importance)
    errors += errs
    fields: dict[str, Any] = {
        "kind": args.kind,
        "text": read_text(STDIN) if args.text == STDIN else args.text,
        "memorule_kind": args.memorule_kind,
        "subject": args.subject,
        "body": args.body,
        "applies_to": applies_to,
        "evidence_signal_id": args.evidence_signal_id,
        "confidence": args.confidence,
        "session": session,
        "memory_type": args.memory_type,
        "id": args.id,
        "importance": importance,
    }
    # Every field is checked before the store is opened: bad input never creates a store.
    more = remember_errors(**fields)
    if applies_to is not None and not applies_to:
        more = _without_required(more, "applies_to")
    if session is None:  # the writer's one error is `writer_errors`, reported last
        more = [e for e in more if e.field not in {"session_id", "persona", "session"}]
    if errors or more or writer_errors:
        raise ValidationError(errors + more + writer_errors)
    app.out(remember(app.store(), namespace=app.namespace, **fields))
    return 0


def update(args: argparse.Namespace, app: App) -> int:
    """Append a new state to a memorule; print its id."""
    applies_to, errors = parse_applies_to(args.applies_to)
    session, errs = parse_session(args, app)
    errors += errs
    changed: dict[str, Any] = {
        "memorule_kind": args.memorule_kind,
        "subject": args.subject,
        "body": args.body,
        "applies_to": applies_to or None,
        "evidence_signal_id": args.evidence_signal_id,
        "confidence": args.confidence,
    }
    if errors:
        raise ValidationError(errors + memorule_errors(partial=True, **changed))
    state = update_memorule(app.store(), args.id, namespace=app.namespace, session=session, **changed)
    app.out(state.memorule_id)
    return 0


def delete(args: argparse.Namespace, app: App) -> int:
    """Delete a memorule; exit 2 if there is none with that id."""
    session, errors = parse_session(args, app)
    if errors:
        raise ValidationError(errors)
    found = delete_memorule(
        app.store(),
        args.id,
        namespace=app.namespace,
        session=session,
        evidence_signal_id=args.evidence_signal_id,
    )
    if not found:
        _not_found(args.id, app)
        return EXIT_NOT_FOUND
    app.out(f"deleted {printable(args.id)}")
    return 0


def history(args: argparse.Namespace, app: App) -> int:
    """Print every state of a memorule, oldest first; exit 2 if there is none."""
    states = memorule_history(app.store(), args.id, namespace=app.namespace)
    if not states:
        _not_found(args.id, app, deleted=_deletion(args.id, app))
        return EXIT_NOT_FOUND
    if args.json:
        app.print_json([s.as_dict() for s in states])
        return 0
    for s in states:
        applies = " ".join(f"{k}={v}" for k, v in sorted(s.applies_to.items()))
        app.out(
            printable(
                f"v{s.version}  {s.written_at}  {s.memorule_kind}  {s.confidence}  [{applies}]  "
                f"{s.subject}: {s.body}  (by {s.written_by_persona or '-'}/{s.written_by_session_id or '-'})"
            )
        )
    return 0


def audit(args: argparse.Namespace, app: App) -> int:
    """Print the tenant's memorule audit events, oldest first."""
    events = audit_events(app.store(), since=args.since, tenant=app.namespace.tenant_id)
    if args.json:
        app.print_json([e.as_dict() for e in events])
        return 0
    for e in events:
        # One event, one line: an id or a name holding a newline must not forge another event.
        app.out(
            printable(
                f"{e.written_at}  {e.action:<6}  {e.memorule_id}  project={e.project_id}  "
                f"session={e.written_by_session_id or '-'}  persona={e.written_by_persona or '-'}  "
                f"evidence={e.evidence_signal_id or '-'}"
            )
        )
    return 0


def _not_found(memorule_id: str, app: App, *, deleted: AuditEvent | None = None) -> None:
    if deleted is None:
        sys.stderr.write(f"error: ID: no memorule {memorule_id!r} in {app.namespace} (not_found)\n")
        return
    by = deleted.written_by_persona or "-"
    sys.stderr.write(
        printable(
            f"error: ID: memorule {memorule_id!r} in {app.namespace} was deleted at {deleted.written_at} "
            f"by {by}; its states went with it, its audit events stay (`audit`) (deleted)"
        )
        + "\n"
    )


def _deletion(memorule_id: str, app: App) -> AuditEvent | None:
    """The audit event that deleted the memorule in this namespace, if one did."""
    events = audit_events(app.store(), tenant=app.namespace.tenant_id)
    gone = [
        e
        for e in events
        if e.memorule_id == memorule_id and e.action == "delete" and e.project_id == app.namespace.project_id
    ]
    return gone[-1] if gone else None
