"""The ACT loop's functional core: prompts, loop state, no threads and no actors."""
