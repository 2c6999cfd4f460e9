"""Many agent processes on one PostgreSQL database, each its own tenant, writing and reading
at once: no acknowledged write is lost, no read returns another tenant's row, no error.

The issue's harness is 8 processes for 60 s; CI runs 4 for a few seconds (`--slow`: 10x).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from pg_server import require

from broker import Namespace
from sources.storage._postgres import PostgresEngine

require("psycopg")

AGENTS = 4
SECONDS = 3.0
_AGENT = textwrap.dedent(
    """
    import json, sys, time
    from broker import Namespace
    from sources.storage import _analysis
    from sources.storage._entries import EntryRow
    from sources.storage._postgres import PostgresEngine

    url, tenant, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    ns = Namespace(tenant_id=tenant, project_id="shared-name")  # every agent: same project name
    engine = PostgresEngine.open(url, migrate=False, connections=2)
    acked, foreign, errors, reads, i = [], 0, [], 0, 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        i += 1
        text = f"deploy notes {i}: the payment service deploys on Friday"
        try:
            with engine.write() as w:
                ns_id = w.ensure_namespace(ns)
                row = EntryRow(id=f"{tenant}-{i}", kind="note", memory_type=None, text=text,
                               created_at="2026", importance=0.5, metadata="{}")
                rowid = w.entries.insert(ns_id, ns, row)
                w.index_document(ns_id, (0, rowid), _analysis.terms(text))
            acked.append(f"{tenant}-{i}")
            with engine.read() as r:
                hits = r.lexical_candidates(ns_id, ["deploy", "payment"], corpus=0, limit=20)
                rows = r.entries.rows(ns_id, [h.rowid for h in hits])
                unfiltered = r.scope.ns(ns_id).rows("SELECT tenant_id FROM entries")
            reads += 1
            foreign += sum(e.tenant_id != tenant for e in rows) + sum(t != tenant for (t,) in unfiltered)
        except Exception as exc:
            errors.append(repr(exc))
    engine.close()
    print(json.dumps({"acked": acked, "foreign": foreign, "errors": errors, "reads": reads}))
    """
)


def test_many_agents_lose_no_write_and_read_no_other_tenant(pg_url: str, slow_factor: int) -> None:
    """Agents racing on one database, each a tenant with the same project name, lose no
    acknowledged write, never read another tenant's row, and see no error."""
    PostgresEngine.open(pg_url).close()
    root = Path(__file__).resolve().parents[4]
    seconds = str(SECONDS * slow_factor)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _AGENT, pg_url, f"tenant{a}", seconds],
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        for a in range(AGENTS)
    ]
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120 * slow_factor)
        assert proc.returncode == 0
        reports.append(json.loads(out))
    engine = PostgresEngine.open(pg_url, migrate=False)
    try:
        for a, report in enumerate(reports):
            ns = Namespace(tenant_id=f"tenant{a}", project_id="shared-name")
            with engine.read() as r:
                ns_id = r.namespace_id(ns)
                assert ns_id is not None
                stored = set(r.entries.texts(ns_id, report["acked"]))
            assert report["errors"] == []
            assert report["foreign"] == 0
            assert report["reads"] > 0
            assert stored == set(report["acked"])  # every acknowledged write is there
    finally:
        engine.close()
