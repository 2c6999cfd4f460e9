"""Tests of memorule recall: matching a session, ranking, visibility, the floor."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from memorule_kit import (
    NS,
    QUERY,
    SESSION,
    damage_state,
    field_codes,
    fill,
    recall_ids,
    write_rule,
)
from store_kit import StoreOpener

from broker import (
    RECALL_MIN_SCORE,
    ConfigError,
    Namespace,
    SessionContext,
    ValidationError,
)
from sources import (
    MemoryStore,
    NewEntry,
    semantic_recall,
    update_memorule,
)
from sources._memorules import context_overlap
from sources._memorules._recall import own_evidence
from sources.embedding._embedder import load_default_embedder
from sources.relevance._relevance import Reference

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt


@pytest.mark.parametrize(
    ("applies_to", "context", "expected"),
    [
        ({"persona": "donna"}, SessionContext(persona="donna"), 1),
        ({"persona": "donna"}, SessionContext(persona="texi"), None),
        ({"persona": "donna"}, SessionContext(), 0),
        ({"persona": "donna", "surface": "cli"}, SessionContext(persona="donna"), 1),
        ({"surface": "cli"}, SessionContext(persona="donna"), 0),
        ({"persona": "donna", "surface": "cli"}, SessionContext(persona="donna", surface="cli"), 2),
        ({"persona": "donna", "surface": "cli"}, SessionContext(persona="donna", surface="web"), None),
        ({"specialization": "sql"}, SessionContext(specialization="sql", persona="x"), 1),
        ({"scope": "global"}, SessionContext(), 0),
        ({"scope": "global"}, SessionContext(scope="project"), 1),
        ({"scope": "org"}, SessionContext(scope="persona"), 1),
        ({"scope": "project"}, SessionContext(scope="project"), 1),
        ({"scope": "project"}, SessionContext(scope="org"), None),
        ({"scope": "persona"}, SessionContext(scope="project"), None),
        ({"scope": "org"}, SessionContext(scope="global"), None),
        ({"scope": "persona", "persona": "donna"}, SessionContext(scope="persona", persona="donna"), 2),
    ],
)
def test_context_overlap(applies_to: dict[str, str], context: SessionContext, expected: int | None) -> None:
    """Only a key the session states can exclude a rule (scope by level: a rule covers its level and
    narrower ones); a key it leaves unset counts as no overlap."""
    assert context_overlap(applies_to, context) == expected


def test_ranking_by_overlap(store: MemoryStore) -> None:
    """With equal confidence, more matching applies_to keys rank first (regardless of age)."""
    three = write_rule(
        store, id="three", applies_to={"persona": "donna", "surface": "cli", "scope": "project"}
    )
    two = write_rule(store, id="two", applies_to={"persona": "donna", "surface": "cli"})
    one = write_rule(store, id="one", applies_to={"persona": "donna"})
    ctx = SessionContext(persona="donna", surface="cli", scope="project")
    assert recall_ids(store, ctx) == [three, two, one]
    matches = semantic_recall(store, QUERY, namespace=NS, source_type="memorule", context=ctx)
    assert [(m.overlap, m.rank_weight) for m in matches] == [(3, 6), (2, 4), (1, 2)]


def test_ranking_by_confidence(store: MemoryStore) -> None:
    """With equal overlap, observed > inferred > asserted (regardless of age)."""
    observed = write_rule(store, id="obs", confidence="observed")
    inferred = write_rule(store, id="inf", confidence="inferred")
    asserted = write_rule(store, id="ass", confidence="asserted")
    assert recall_ids(store, SessionContext(scope="project")) == [observed, inferred, asserted]


def test_ranking_multiplies_overlap_by_confidence(store: MemoryStore) -> None:
    """Overlap x weight: 1 key observed (3) beats 2 keys asserted (2); 3 asserted ties 1 observed."""
    two_asserted = write_rule(
        store, id="a2", confidence="asserted", applies_to={"persona": "donna", "scope": "project"}
    )
    one_observed = write_rule(store, id="o1", confidence="observed", applies_to={"persona": "donna"})
    ctx = SessionContext(persona="donna", scope="project")
    assert recall_ids(store, ctx) == [one_observed, two_asserted]


def test_ranking_ties_break_by_recency(store: MemoryStore) -> None:
    """Equal overlap x weight: the newer write wins, and an update makes a rule newer."""
    old = write_rule(store, id="old")
    new = write_rule(store, id="new")
    assert recall_ids(store, SessionContext(scope="project")) == [new, old]
    update_memorule(store, old, namespace=NS, session=SESSION, evidence_signal_id="sig-3")
    assert recall_ids(store, SessionContext(scope="project")) == [old, new]


def test_a_tie_on_the_weighted_score_goes_to_the_newer_write_not_the_confidence(store: MemoryStore) -> None:
    """The seed's rule: 1 observed key (1 x 3) ties 3 asserted keys (3 x 1), and the newer rule wins."""
    three_keys = {"persona": "donna", "surface": "cli", "scope": "project"}
    ctx = SessionContext(persona="donna", surface="cli", scope="project")
    observed = write_rule(store, id="o1", confidence="observed", applies_to={"persona": "donna"})
    asserted = write_rule(store, id="a3", confidence="asserted", applies_to=three_keys)
    matches = semantic_recall(store, QUERY, namespace=NS, source_type="memorule", context=ctx)
    assert [(m.id, m.rank_weight) for m in matches] == [(asserted, 3), (observed, 3)]
    update_memorule(store, observed, namespace=NS, session=SESSION, evidence_signal_id="sig-3")
    assert recall_ids(store, ctx) == [observed, asserted]


def test_only_a_contradicting_rule_is_left_out(store: MemoryStore) -> None:
    """A rule for another persona or surface is excluded; one keyed on what the session leaves unset is kept."""
    write_rule(store, id="texi", applies_to={"persona": "texi"})
    write_rule(store, id="web", applies_to={"surface": "web"})
    mine = write_rule(store, id="mine", applies_to={"persona": "donna"})
    sql = write_rule(store, id="sql", applies_to={"specialization": "sql"})
    assert recall_ids(store, SessionContext(persona="donna", surface="cli")) == [mine, sql]
    assert sorted(recall_ids(store, SessionContext())) == sorted(["texi", "web", mine, sql])


def test_unstated_keys_rank_below_matches_whatever_their_confidence(store: MemoryStore) -> None:
    """A matched asserted rule outranks an observed rule whose key the session does not state."""
    unstated = write_rule(store, id="unstated", confidence="observed", applies_to={"surface": "cli"})
    matched = write_rule(store, id="matched", confidence="asserted", applies_to={"persona": "donna"})
    assert recall_ids(store, SessionContext(persona="donna")) == [matched, unstated]


def test_an_empty_context_still_ranks_by_confidence(store: MemoryStore) -> None:
    """Without a session context, an older observed rule outranks a newer asserted one."""
    observed = write_rule(store, id="observed", confidence="observed", applies_to={"scope": "global"})
    asserted = write_rule(store, id="asserted", confidence="asserted", applies_to={"scope": "global"})
    assert recall_ids(store, SessionContext()) == [observed, asserted]
    matches = semantic_recall(store, QUERY, namespace=NS, source_type="memorule")
    assert [m.id for m in matches] == [observed, asserted]
    assert {m.source_type for m in matches} == {"memorule"}


def test_irrelevant_rules_stay_under_the_floor(store: MemoryStore) -> None:
    """A rule that applies to the context but not to the query is not recalled."""
    write_rule(store)
    ctx = SessionContext(scope="project")
    assert (
        semantic_recall(store, "carol pixel guitar", namespace=NS, source_type="memorule", context=ctx) == []
    )
    assert semantic_recall(store, "the and of", namespace=NS, source_type="memorule", context=ctx) == []


def test_memorule_score_is_the_store_score(store: MemoryStore) -> None:
    """A memorule's score is the calibrated score the store gives the same entry."""
    rid = write_rule(store)
    (match,) = semantic_recall(
        store, QUERY, namespace=NS, source_type="memorule", context=SessionContext(scope="project")
    )
    (recalled,) = [r for r in store.recall(QUERY, namespace=NS) if r.memory.id == rid]
    assert match.score == pytest.approx(recalled.score)


def test_memory_source_type_returns_all_memory(store: MemoryStore) -> None:
    """source_type='memory' mixes notes and memorules (whatever their applies_to)."""
    note = store.add_entry("Staging checklist for the production deploy release rollout", namespace=NS)
    rule = write_rule(store, applies_to={"persona": "texi"})
    matches = semantic_recall(store, QUERY, namespace=NS, source_type="memory")
    by_id = {m.id: m for m in matches}
    assert set(by_id) == {note, rule}
    assert (by_id[rule].kind, by_id[rule].memorule_kind, by_id[rule].applies_to) == (
        "memorule",
        "behavioral_rule",
        {"persona": "texi"},
    )
    assert (by_id[note].kind, by_id[note].memorule_kind) == ("note", None)
    assert (by_id[note].source_type, by_id[rule].source_type) == ("memory", "memorule")
    assert by_id[note].as_dict()["source_type"] == "memory"
    assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)


def test_typed_recall_keeps_the_asked_types(store: MemoryStore) -> None:
    """`types` narrows both source types as a turn's typed request does (unclassified memories stay)."""
    plain = write_rule(store, id="plain")
    write_rule(store, id="epi", memory_type="episodic")
    note = store.add_entry(
        "Staging checklist for the production deploy release rollout", namespace=NS, memory_type="procedural"
    )
    rules = semantic_recall(store, QUERY, namespace=NS, source_type="memorule", types=["procedural"])
    assert [m.id for m in rules] == [plain]
    memory = semantic_recall(store, QUERY, namespace=NS, source_type="memory", types=["procedural"])
    assert {m.id for m in memory} == {note, plain}
    with pytest.raises(ValidationError) as exc:
        semantic_recall(store, QUERY, namespace=NS, types=["dream"])
    assert field_codes(exc) == {("types", "invalid_choice")}


def test_recall_arguments_are_validated_together(store: MemoryStore) -> None:
    """Bad query, source_type, top_k and context are all reported at once."""
    with pytest.raises(ValidationError) as exc:
        semantic_recall(
            store,
            "",
            namespace=NS,
            source_type="rules",
            top_k=0,
            context=SessionContext(scope="team"),
            mode="fuzzy",
        )
    assert field_codes(exc) == {
        ("mode", "invalid_choice"),
        ("query", "empty"),
        ("source_type", "invalid_choice"),
        ("top_k", "out_of_range"),
        ("context", "invalid_choice"),
    }


def test_dense_modes_need_an_embedder(store: MemoryStore) -> None:
    """A dense recall of memorules on a store without a model is a ConfigError, as in the store."""
    write_rule(store)
    with pytest.raises(ConfigError):
        semantic_recall(store, QUERY, namespace=NS, source_type="memorule", mode="hybrid")


@pytest.mark.parametrize(
    ("scope", "visible"),
    [("global", True), ("org", True), ("project", False), ("persona", False), (None, False)],
)
def test_visibility_across_projects(store: MemoryStore, scope: str | None, visible: bool) -> None:
    """Global and org rules apply to every project of the tenant; others only to their own."""
    api = Namespace(tenant_id="acme", project_id="api")
    fill(store, api, 20)
    applies: dict[str, str] = {"persona": "donna"} if scope is None else {"scope": scope, "persona": "donna"}
    rid = write_rule(store, api, applies_to=applies)
    ctx = SessionContext(persona="donna")
    assert recall_ids(store, ctx, api) == [rid]
    assert recall_ids(store, ctx, NS) == ([rid] if visible else [])
    in_memory = [m.id for m in semantic_recall(store, QUERY, namespace=NS, source_type="memory")]
    assert in_memory == ([rid] if visible else [])


def test_a_project_without_memories_still_sees_tenant_wide_rules(store: MemoryStore) -> None:
    """A brand-new project of the tenant gets the tenant's global rules (scored at home)."""
    rid = write_rule(store, applies_to={"scope": "global"})
    fresh = Namespace(tenant_id="acme", project_id="brand-new")
    assert recall_ids(store, SessionContext(), fresh) == [rid]


def test_memorules_never_cross_tenants(store: MemoryStore) -> None:
    """Another tenant's global rules are invisible, in both source types."""
    globex = Namespace(tenant_id="globex", project_id="web")
    fill(store, globex, 20)
    theirs = write_rule(store, globex, applies_to={"scope": "global"})
    assert recall_ids(store, SessionContext(), NS) == []
    assert semantic_recall(store, QUERY, namespace=NS, source_type="memory") == []
    assert recall_ids(store, SessionContext(), globex) == [theirs]


def test_an_updated_scope_changes_visibility(store: MemoryStore) -> None:
    """Visibility follows the current state: narrowing global to project hides it elsewhere."""
    api = Namespace(tenant_id="acme", project_id="api")
    fill(store, api)
    rid = write_rule(store, api, applies_to={"scope": "global"})
    assert recall_ids(store, SessionContext(), NS) == [rid]
    update_memorule(store, rid, namespace=api, session=SESSION, applies_to={"scope": "project"})
    assert recall_ids(store, SessionContext(), NS) == []


class QueryCountingEmbedder:
    """A fake model that counts how often it embeds one given query."""

    model_id = "fake-count"
    dim = 4

    def __init__(self, query: str) -> None:
        self.query = query
        self.query_calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors; count the calls that embed the query alone."""
        if list(texts) == [self.query]:
            self.query_calls += 1
        return np.full((len(texts), self.dim), 0.5, dtype=np.float32)


def test_query_is_embedded_once_across_visited_projects(make_store: StoreOpener) -> None:
    """Recall that probes several projects of a tenant embeds the query once, not once per project."""
    fake = QueryCountingEmbedder(QUERY)
    with make_store(mode="hybrid", embedder=fake) as store:
        for project in ("web", "api", "ops"):
            ns = Namespace(tenant_id="acme", project_id=project)
            fill(store, ns, 10)
            write_rule(store, ns, applies_to={"scope": "global"})
        semantic_recall(store, QUERY, namespace=NS, source_type="memorule", mode="hybrid")
    assert fake.query_calls == 1


@pytest.mark.parametrize("source_type", ["memorule", "memory"])
def test_recall_skips_a_damaged_rule_and_serves_the_rest(store: MemoryStore, source_type: str) -> None:
    """A damaged rule is left out of recall; an intact one on the same topic is still found."""
    bad = write_rule(store, subject="Staging first, broken")
    good = write_rule(store)
    damage_state(store, bad, 1)
    ctx = SessionContext(scope="project")
    hits = semantic_recall(store, QUERY, namespace=NS, source_type=source_type, context=ctx)
    assert good in [h.id for h in hits]
    assert bad not in [h.id for h in hits]


def test_recall_refuses_an_option_it_does_not_take(store: MemoryStore) -> None:
    """A misspelt option is a TypeError, not an option silently ignored."""
    with pytest.raises(TypeError, match="limit"):
        semantic_recall(store, QUERY, namespace=NS, limit=3)  # type: ignore[call-arg]


_TEAM_NOTES = (
    "Priya owns the payments service and reviews every change to it.",
    "Deploys go through the release pipeline: merge to main, wait for staging checks, then promote.",
    "In March a Friday deploy broke checkout for two hours.",
    "The main database is PostgreSQL 16 on a managed cluster.",
    "Commit messages follow Conventional Commits.",
    "Tom is on call this week; page him through Opsgenie.",
    "Secrets live in Vault, never in the repository.",
    "CI runs on GitHub Actions and takes about twelve minutes.",
)
_NO_FRIDAYS = "Refuse to deploy any production service on a Friday."


@pytest.mark.parametrize(("mode", "served"), [("hybrid", True), ("dense", True), ("lexical", False)])
def test_a_rule_sharing_no_word_with_the_task_is_recalled_by_its_meaning_in_dense_modes(
    make_store: StoreOpener, mode: str, served: bool
) -> None:
    """A task sharing no word with the no-Friday-deploys rule gets it in dense modes, not lexical."""
    with make_store(mode="hybrid", embedder=load_default_embedder()) as store:
        store.add_entries([NewEntry(text=t) for t in _TEAM_NOTES], namespace=NS)
        rid = write_rule(store, subject="no Friday deploys", body=_NO_FRIDAYS, applies_to={"scope": "global"})
        task = "Push the hotfix live this afternoon"
        found = semantic_recall(store, task, namespace=NS, source_type="memorule", mode=mode)
        assert [m.id for m in found] == ([rid] if served else [])
        assert (
            semantic_recall(store, "what time is it", namespace=NS, source_type="memorule", mode=mode) == []
        )


def test_a_rule_is_recalled_by_its_meaning_when_the_shared_retrieval_fell_short(
    make_store: StoreOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no shared nearest run (a large namespace's short one), the rules come from a search."""
    monkeypatch.setattr(Reference, "nearest", lambda _self, _corpus, _depth: None)
    with make_store(mode="hybrid", embedder=load_default_embedder()) as store:
        store.add_entries([NewEntry(text=t) for t in _TEAM_NOTES], namespace=NS)
        rid = write_rule(store, subject="no Friday deploys", body=_NO_FRIDAYS, applies_to={"scope": "global"})
        task = "Push the hotfix live this afternoon"
        assert [m.id for m in semantic_recall(store, task, namespace=NS, source_type="memorule")] == [rid]


def test_the_memorules_among_entries_come_in_the_order_asked_and_only_of_their_namespace(
    store: MemoryStore,
) -> None:
    """`MemoruleReads.among` keeps the rules of the rowids given, once, in their order: no note, no other project's."""
    first, second = (
        write_rule(store),
        write_rule(store, subject="Second rule", body="Always write a changelog entry."),
    )
    note = store.add_entry("A note that is no rule at all", namespace=NS)
    there = Namespace(tenant_id="acme", project_id="other")
    elsewhere = write_rule(store, there)
    with store.engine.read() as r:
        here, other = r.namespace_id(NS), r.namespace_id(there)
        assert here is not None
        assert other is not None

        def rowid(ns_id: int, id_: str) -> int:
            found = r.entries.find(ns_id, id_)
            assert found is not None
            return found[0]

        asked = [rowid(here, i) for i in (note, second, first, second)]
        assert [c.id for c in r.memorules.among(here, asked)] == [second, first]
        assert r.memorules.among(other, asked) == []
        assert [c.id for c in r.memorules.among(other, [rowid(other, elsewhere)])] == [elsewhere]


_FREEZE = "Deploys freeze every Friday after the payment incident."


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_a_rule_sharing_two_distinctive_words_with_the_task_is_recalled_on_its_own_evidence(
    make_store: StoreOpener, mode: str
) -> None:
    """A note on the same words takes the namespace's best band, so the rule's calibrated score
    fell under the floor (0.35 lexical, 0.38 hybrid, in this store of a new user's); its own
    evidence (two distinctive words shared, among the namespace's rules) clears it, scored
    without gate or band. One shared word, or small talk, does not."""
    with make_store(mode="hybrid", embedder=load_default_embedder()) as store:
        store.add_entries(
            [NewEntry(text=t) for t in (_FREEZE, "Mia is allergic to peanuts and tree nuts.")], namespace=NS
        )
        rid = write_rule(store, subject="no friday deploys", body="Never deploy on a Friday afternoon.")
        write_rule(store, subject="no blind retries", body="Fix a flaky test's race; never add a retry loop.")

        def recalled(task: str) -> list[tuple[str, float | None]]:
            found = semantic_recall(store, task, namespace=NS, source_type="memorule", mode=mode)
            return [(m.id, m.qpp) for m in found]

        assert recalled("Deploy the payment fix on Friday") == [(rid, None)]
        assert recalled("what time is it") == []
    (one_word,) = own_evidence("Deploy the new billing service", ["no friday deploys"], held=2)
    assert one_word < RECALL_MIN_SCORE


def test_own_evidence_reads_a_terms_rarity_among_all_the_namespaces_rules() -> None:
    """The rules the turn did not read share no term with the task: they count in the rarity of
    its terms, so the same match weighs more among twenty rules than among two."""
    rule = ["no friday deploys"]
    (among_two,) = own_evidence("Deploy the payment fix on Friday", rule, held=2)
    (among_twenty,) = own_evidence("Deploy the payment fix on Friday", rule, held=20)
    assert among_two < among_twenty
    assert own_evidence("thanks!", rule, held=20) == [0.0]


def test_a_rule_the_session_filters_out_still_makes_shared_words_common(make_store: StoreOpener) -> None:
    """Three rules for another persona also on Friday deploys: a session naming a persona that
    filters them out does not raise the fourth rule's own evidence (it counted their words as
    absent, 0.565 against none at all without a persona)."""
    with make_store(mode="lexical") as store:
        store.add_entries([NewEntry(text=_FREEZE)], namespace=NS)
        rid = write_rule(store, subject="no friday deploys", body="Never deploy on a Friday afternoon.")
        for i in range(3):
            write_rule(
                store,
                subject=f"friday deploys {i}",
                body="Deploy on Friday only with a rollback plan.",
                applies_to={"persona": "ops"},
            )
        task = "Deploy the payment fix on Friday"

        def score(context: SessionContext | None) -> float | None:
            found = semantic_recall(store, task, namespace=NS, source_type="memorule", context=context)
            return next((m.score for m in found if m.id == rid), None)

        assert score(SessionContext(persona="dev")) == pytest.approx(score(None))


def test_a_long_rule_gets_no_own_evidence_from_its_bodys_words(make_store: StoreOpener) -> None:
    """Own evidence reads the rule's subject: a guidelines rule whose body shares four words with
    "Fix the failing test in the parser" (among twenty rules, each reads as rare: 1.0 on its whole
    text) is scored on the calibrated scale alone (`qpp` set), as any note would be."""
    with make_store(mode="lexical") as store:
        fill(store, NS)
        note = "The parser's failing test: the grammar test fails on empty input; fix it in parse_expr."
        store.add_entries([NewEntry(text=note)], namespace=NS)
        body = (
            "Fix every failing test before asking for review. Parsers need tests for each grammar rule. "
            "Read the logs of the UI before filing a bug, and keep each fix small."
        )
        rid = write_rule(store, subject="coding guidelines", body=body)
        for i in range(19):  # among twenty rules the body's words read as rare
            write_rule(store, subject=f"invoice rule {i}", body="Invoices go out on the first working day.")
        found = semantic_recall(
            store, "Fix the failing test in the parser", namespace=NS, source_type="memorule"
        )
        (match,) = [m for m in found if m.id == rid]
        assert match.qpp is not None


def test_a_subject_stuffed_with_keywords_gets_no_own_evidence() -> None:
    """Each term of a subject the task does not carry costs a bit: a subject of twenty keywords
    shares two with most tasks yet stays far under the floor, where a short subject the task
    names clears it (a stuffed subject reached every task at 0.82-1.00 in a new user's store)."""
    stuffed = (
        "fix bug deploy release review test checkout payment password key vault migration index "
        "database schema api endpoint partner webhook build"
    )
    subjects = [stuffed, "android keystore rotation", "no friday deploys"]
    for task in ("Fix the checkout bug", "Deploy the payment migration", "Review the partner webhook"):
        assert own_evidence(task, subjects, held=6)[0] < 0.01
    assert own_evidence("Rotate the Android keystore", subjects, held=6)[1] >= RECALL_MIN_SCORE
