"""Chalie: a self-hosted cognitive assistant server.

Its floors, top to bottom (docs/architecture.md; kept by the contracts in pyproject.toml):
the command line and the wiring (cli*, doctor*, server*), edge/, actors/, the core (act/,
memory/, cognition/, background/, tools/, interfaces/, mcp/, world/, llm/), store/, and the
ground floor (config*, reload, clock, errors, metrics, logs, frames, paths, prompts, outbox,
values/). A module imports only from its own floor or a lower one.
"""

__version__ = "0.1.0"
