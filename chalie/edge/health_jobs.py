"""GET /health's `jobs`: the background jobs that wait after failing, and why.

Each entry: {"job": "encoder", "channel": "main", "state": "backing_off", "failures": 3,
"retry_at": <epoch seconds>, "since": <epoch seconds>, "error": "the light model cannot write
the episode JSON: ..."} (chalie/background/backoff.py), oldest first; [] when every job works.
A job backing off is no outage: it never changes the status of /health. The dashboard (/brain)
shows the same list as a notice.
"""

from __future__ import annotations

from typing import Any

from chalie.edge.context import EdgeContext


def jobs_field(ctx: EdgeContext) -> list[dict[str, Any]]:
    """The `jobs` field of GET /health."""
    return [] if ctx.backoff is None else ctx.backoff.describe()
