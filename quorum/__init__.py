"""kraftlog: quorum."""
