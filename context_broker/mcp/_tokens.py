"""Bearer tokens of the HTTP transport: each maps to exactly one namespace, and the client
never names its tenant.

The tokens come from a JSON file (`--tokens FILE`) or the `CONTEXT_BROKER_MCP_TOKENS`
environment variable, both holding a list of `{"token": ..., "tenant": ..., "project"?: ...}`
(project defaults to the server's `--project`). A presented token is compared with every
known token in constant time (`hmac.compare_digest` over SHA-256 digests, so neither the
length nor the position of a match leaks through timing).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

import attrs

from broker import FieldError, Namespace, ValidationError

ENV_TOKENS = "CONTEXT_BROKER_MCP_TOKENS"
MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused: a bearer token is a password."""


@attrs.frozen(kw_only=True)
class Grant:
    """What one token grants: one namespace; `label` names the token in logs, never the token."""

    namespace: Namespace
    label: str
    digest: bytes = attrs.field(repr=False)


@attrs.frozen
class TokenMap:
    """The known tokens; `lookup` finds the grant of a presented token."""

    grants: tuple[Grant, ...]

    def lookup(self, token: str) -> Grant | None:
        """The grant of `token`, or None; every known token is compared, in constant time."""
        presented = _digest(token)
        found = None
        for grant in self.grants:
            if hmac.compare_digest(presented, grant.digest):
                found = grant
        return found


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def load_tokens(path: str | None, *, project: str) -> TokenMap:
    """Read the tokens from `path`, else from $CONTEXT_BROKER_MCP_TOKENS; ValidationError if bad."""
    if path is not None:
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError.single("tokens", "unreadable", f"{path}: {exc}") from exc
    else:
        text = os.environ.get(ENV_TOKENS, "")
    if not text.strip():
        raise ValidationError.single(
            "tokens", "required", f"HTTP needs at least one token (--tokens FILE or ${ENV_TOKENS})"
        )
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError.single("tokens", "invalid_json", exc.msg) from exc
    return parse_tokens(entries, project=project)


def parse_tokens(entries: object, *, project: str) -> TokenMap:
    """Validate a list of token entries; every problem at once."""
    if not isinstance(entries, list) or not entries:
        raise ValidationError.single(
            "tokens", "type", "must be a non-empty list of {token, tenant, project?}"
        )
    errors: list[FieldError] = []
    grants: list[Grant] = []
    for i, entry in enumerate(entries):
        grant, problems = _grant(i, entry, project)
        errors += problems
        if grant is not None:
            if any(hmac.compare_digest(grant.digest, g.digest) for g in grants):
                errors.append(FieldError(field=f"tokens[{i}].token", code="duplicate", message="given twice"))
            grants.append(grant)
    if errors:
        raise ValidationError(errors)
    return TokenMap(tuple(grants))


def _grant(i: int, entry: Any, project: str) -> tuple[Grant | None, list[FieldError]]:  # noqa: ANN401 - JSON
    at = f"tokens[{i}]"
    if not isinstance(entry, dict):
        return None, [
            FieldError(field=at, code="type", message="must be an object {token, tenant, project?}")
        ]
    errors = [
        FieldError(field=f"{at}.{k}", code="unknown", message="unknown field")
        for k in entry
        if k not in {"token", "tenant", "project"}
    ]
    token = entry.get("token")
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        errors.append(
            FieldError(
                field=f"{at}.token",
                code="too_short",
                message=f"must be a string of >= {MIN_TOKEN_CHARS} characters",
            )
        )
    tenant: Any = entry.get("tenant")
    try:
        namespace = Namespace(tenant_id=tenant, project_id=entry.get("project", project))
    except (ValueError, TypeError) as exc:
        errors.append(FieldError(field=f"{at}.tenant", code="invalid", message=str(exc)))
        namespace = None
    if errors or namespace is None or not isinstance(token, str):
        return None, errors
    return Grant(namespace=namespace, label=f"token {i}", digest=_digest(token)), []
