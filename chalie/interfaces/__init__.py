"""Paired interfaces: the /health, /capabilities, /execute and / contract, and cards."""
