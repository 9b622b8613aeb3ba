"""Memory: what the pre-loop seeds into a prompt from what Chalie was told before.

The core floor: recall and context read the store; only the StoreWriter (an actor) writes it."""
