"""The overload benchmark's clients and attackers (`tests/perf/overload_bench.py`)."""
