"""Bearer tokens of the MCP HTTP transport: one namespace per token, bad config refused at once."""

from __future__ import annotations

import json

import pytest

from broker import Namespace, ValidationError
from context_broker.mcp import ENV_TOKENS, load_tokens, parse_tokens

A = "a" * 16
B = "b" * 40


def test_each_token_maps_to_its_namespace():
    """A token finds its own grant; the project defaults to the server's."""
    tokens = parse_tokens(
        [{"token": A, "tenant": "acme"}, {"token": B, "tenant": "globex", "project": "x"}], project="web"
    )
    assert tokens.lookup(A).namespace == Namespace(tenant_id="acme", project_id="web")
    assert tokens.lookup(B).namespace == Namespace(tenant_id="globex", project_id="x")


@pytest.mark.parametrize("presented", ["", A[:-1], A + "a", A.upper(), B[:16]])
def test_near_misses_find_nothing(presented):
    """A prefix, an extension or another case of a token is no token."""
    assert (
        parse_tokens([{"token": A, "tenant": "acme"}, {"token": B, "tenant": "g"}], project="p").lookup(
            presented
        )
        is None
    )


def test_every_problem_is_reported_at_once():
    """Short, duplicate and tenantless tokens and unknown keys, in one ValidationError."""
    entries = [
        {"token": "short", "tenant": "acme"},
        {"token": A, "tenant": "acme"},
        {"token": A, "tenant": "globex"},
        {"token": B, "role": "admin"},
    ]
    with pytest.raises(ValidationError) as caught:
        parse_tokens(entries, project="web")
    assert [(e.field, e.code) for e in caught.value.errors] == [
        ("tokens[0].token", "too_short"),
        ("tokens[2].token", "duplicate"),
        ("tokens[3].role", "unknown"),
        ("tokens[3].tenant", "invalid"),
    ]


def test_tokens_come_from_a_file_or_the_environment(tmp_path, monkeypatch):
    """--tokens FILE wins; otherwise $CONTEXT_BROKER_MCP_TOKENS; neither is an error."""
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps([{"token": A, "tenant": "acme"}]))
    monkeypatch.setenv(ENV_TOKENS, json.dumps([{"token": B, "tenant": "globex"}]))
    assert load_tokens(str(path), project="p").lookup(A) is not None
    assert load_tokens(None, project="p").lookup(B) is not None
    monkeypatch.delenv(ENV_TOKENS)
    with pytest.raises(ValidationError) as caught:
        load_tokens(None, project="p")
    assert caught.value.errors[0].code == "required"
