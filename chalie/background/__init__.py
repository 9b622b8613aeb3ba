"""The background paths' pure core: budgets, attention, schedules, plans, the DMN's inputs."""
