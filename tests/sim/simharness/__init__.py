"""The seeded simulation harness (issue 23, section 5): real brokers in one process on simulated
time, a network that drops, delays and reorders, and the seed loop that names a failing seed."""

from ._cluster import CLIENT, CONTROLLER, TOPIC, TOPIC_ID, SimBroker, SimCluster, SimNetwork, log_records
from ._loop import SimulationStalled, VirtualTimeLoop, run_simulated
from ._seeds import (
    DEFAULT_SEEDS,
    SeedFailure,
    find_failing_seed,
    find_failing_seed_in_workers,
    run_seeds,
    seeds_from_env,
    workers_from_env,
)

__all__ = [
    "CLIENT",
    "CONTROLLER",
    "DEFAULT_SEEDS",
    "TOPIC",
    "TOPIC_ID",
    "SeedFailure",
    "SimBroker",
    "SimCluster",
    "SimNetwork",
    "SimulationStalled",
    "VirtualTimeLoop",
    "find_failing_seed",
    "find_failing_seed_in_workers",
    "log_records",
    "run_seeds",
    "run_simulated",
    "seeds_from_env",
    "workers_from_env",
]
