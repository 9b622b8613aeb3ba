"""Cognition: what a conversation is about, where it stands and how sure Chalie is.

The functional core here is pure and deterministic (no I/O, no clock, no randomness) and cheap
enough to run on every turn: `words` (tokens, content and salient words, topic names),
`signals` (the NLP signals of a message, the social fast path, the conversation phase) and
`confidence` (feeling-of-knowing, context warmth, memory confidence and the turn's mode).

The core floor: nothing here knows about actors or the edge.
"""
