"""The background paths' pure core: budgets, attention, schedules, plans, the DMN's inputs.

The core floor: the Dmn, Scheduler and Goal actors drive it; it never imports them."""
