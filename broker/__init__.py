"""kraftlog: broker."""
