"""pykka actors: one owner per piece of mutable state, under a supervisor tree.

The actors' floor: below the edge, above the core, which they drive with plain calls. Messages
live with the area that handles them (`*_messages.py`, or beside the actor)."""
