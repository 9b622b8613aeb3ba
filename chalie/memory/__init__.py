"""Memory: what the pre-loop seeds into a prompt from what Chalie was told before."""
