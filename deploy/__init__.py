"""kraftlog: deploy."""
