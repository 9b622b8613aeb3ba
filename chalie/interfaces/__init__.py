"""Paired interfaces: the /health, /capabilities, /execute and / contract, and cards.

The core floor: nothing here knows about actors or the edge."""
