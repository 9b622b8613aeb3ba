"""structlog set-up: JSON lines (or console on a TTY), stdlib and pykka records routed through it.

Context bound with structlog.contextvars (actor, channel, turn_id) appears on every line logged
while it is bound, on the actor's thread and in the worker jobs it submits.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog


def configure(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    renderer: Any
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
        tail: list[Any] = [structlog.processors.dict_tracebacks]
    else:
        renderer = structlog.dev.ConsoleRenderer()
        tail = []
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail, renderer],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    # One line per HTTP request is noise at info; errors still come through.
    logging.getLogger("tornado.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
