"""Chalie: a self-hosted cognitive assistant server."""

__version__ = "0.1.0"
