"""`python -m context_broker` runs the `context-broker` command."""

from __future__ import annotations

from context_broker._cli import main

raise SystemExit(main())
