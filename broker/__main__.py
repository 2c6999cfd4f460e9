"""`python -m broker` runs the CLI."""

from __future__ import annotations

from broker._cli import main

raise SystemExit(main())
