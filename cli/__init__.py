"""kraftlog: cli."""
