"""kraftlog: client."""
