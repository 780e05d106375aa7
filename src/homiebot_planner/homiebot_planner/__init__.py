"""HomieBot high-level planner: EMMOE prompts, output parsing, memory, LMM backends and the planner node."""
