"""`python -m broker` no longer runs the command line: the library cannot import the
application that holds it. One line on stderr names the command to use; exit status 2."""

from __future__ import annotations

import sys

sys.stderr.write("error: the command line is `context-broker` (or `python -m context_broker`)\n")
raise SystemExit(2)
