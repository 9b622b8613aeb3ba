"""The ACT loop's functional core: loop state, the prompt budget, the critic, streamed deltas.

The core floor: no threads and no actors; it imports llm/, the store and the ground floor."""
