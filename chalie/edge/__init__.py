"""Tornado edge: WebSocket and REST in, typed messages to the actors, frames out."""
