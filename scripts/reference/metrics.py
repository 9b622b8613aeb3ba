"""docs/reference/metrics.md from the Prometheus registry of chalie.metrics.

A `Metrics` on a fresh CollectorRegistry holds every metric the server defines up front; the
two collectors the server registers at start (`watch_store`, `watch_goals`: read when scraped)
are added with stand-ins for what they read (a store that is ok, no goal in any state), so their
metrics are listed too. Each metric as prometheus_client exposes it: its name (a counter with
`_total`, a histogram's `_bucket`, `_sum` and `_count`), type, labels and help, by name.
"""

from __future__ import annotations

from typing import Any

from .markdown import GENERATED, code, escape, heading, page, table

SOURCE = "chalie/metrics.py"
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
             "summary": ("", "_sum", "_count")}


def families() -> list[dict[str, Any]]:
    """Every metric family of a server's registry: name, type, help, labels, exposed names,
    and a histogram's buckets."""
    from prometheus_client import CollectorRegistry  # noqa: PLC0415 (imported when needed)
    from prometheus_client.metrics import MetricWrapperBase  # noqa: PLC0415

    from chalie.metrics import Metrics  # noqa: PLC0415
    from chalie.store.goal_rows import STATES  # noqa: PLC0415

    metrics = Metrics(CollectorRegistry())
    metrics.watch_store(lambda: {"state": "ok", "free_bytes": 0, "held_messages": 0})
    metrics.watch_goals(lambda: dict.fromkeys(STATES, 0))
    # A labelled metric with no series yet has no samples to read its labels from:
    # prometheus_client keeps their names on the metric itself.
    declared = {w._name: tuple(w._labelnames) for w in vars(metrics).values()
                if isinstance(w, MetricWrapperBase)}
    out = []
    for family in metrics.registry.collect():
        labels = declared.get(family.name)
        if labels is None:
            labels = tuple(sorted({k for s in family.samples for k in s.labels} - {"le"}))
        buckets = [s.labels["le"] for s in family.samples
                   if s.name == family.name + "_bucket" and "le" in s.labels]
        out.append({"name": family.name, "type": family.type, "help": family.documentation,
                    "labels": labels, "buckets": list(dict.fromkeys(buckets)),
                    "exposed": [family.name + s for s in _SUFFIXES.get(family.type, ("",))]})
    return sorted(out, key=lambda f: f["name"])


_INTRO = """\
Every metric `GET /metrics` exposes, in the Prometheus text format. This page is generated
from the registry the server builds (`{source}`), with prometheus_client's names: a counter
is exposed as `<name>_total`, a histogram as `<name>_bucket`, `<name>_sum` and
`<name>_count`; prometheus_client also exposes `<name>_created` (when the series started)
beside each counter and histogram. The store's and the goals' metrics are read when
scraped. Who may read `/metrics`:
[`server.metrics_token`](configuration.md#server-metrics_token)."""


def render(found: list[dict[str, Any]]) -> str:
    """metrics.md for the metric families `found` (see families())."""
    rows = []
    for f in found:
        about = escape(f["help"], in_table=True)
        if f["buckets"]:
            about += " Buckets (`le`): " + ", ".join(f["buckets"]) + "."
        rows.append([", ".join(code(n) for n in f["exposed"]), f["type"],
                     ", ".join(code(label) for label in f["labels"]) or "none", about])
    return page([GENERATED.format(source=SOURCE), "", "# Metrics", "",
                 _INTRO.format(source=SOURCE), *heading(2, "All metrics", "all-metrics"),
                 *table(("Metric", "Type", "Labels", "What it counts"), rows)])
