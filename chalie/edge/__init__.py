"""Tornado edge: WebSocket and REST in, typed messages to the actors, frames out.

The edge's floor: above the actors; only the command line and the wiring import it."""
