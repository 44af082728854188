"""kraftlog: proto."""
