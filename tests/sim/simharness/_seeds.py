"""Which seeds a scenario runs, and what a failure prints: the seed and the command that replays it.

``KRAFTLOG_SIM_SEED=N`` runs that one seed (replay); ``KRAFTLOG_SIM_SEEDS=N`` runs seeds 0..N-1
(default: `DEFAULT_SEEDS`), ``KRAFTLOG_SIM_SEED_START`` shifts the range (to split a long run).
Runs do not depend on hash randomization (the same seed gave the same run under PYTHONHASHSEED 0,
1 and 12345); the replay command still fixes ``PYTHONHASHSEED=0``, as `make sim` does, so that a
set iterated in a new place cannot make a replay differ.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["DEFAULT_SEEDS", "SeedFailure", "find_failing_seed", "run_seeds", "seeds_from_env"]

DEFAULT_SEEDS = 1000


def seeds_from_env(default: int = DEFAULT_SEEDS) -> list[int]:
    one = os.environ.get("KRAFTLOG_SIM_SEED")
    if one:
        return [int(one)]
    count = int(os.environ.get("KRAFTLOG_SIM_SEEDS", default))
    start = int(os.environ.get("KRAFTLOG_SIM_SEED_START", 0))
    return list(range(start, start + count))


@dataclass(frozen=True)
class SeedFailure:
    seed: int
    error: BaseException

    def describe(self, test_id: str) -> str:
        tb = "".join(traceback.format_exception(self.error))
        return (
            f"seed {self.seed} failed: {self.error!r}\n{tb}\n"
            f"replay it: PYTHONHASHSEED=0 KRAFTLOG_SIM_SEED={self.seed} .venv/bin/python -m pytest '{test_id}' -q"
        )


def find_failing_seed(scenario: Callable[[int], object], seeds: Iterable[int]) -> SeedFailure | None:
    """The first seed whose run raises (an invariant broken, a stall), or None."""
    for seed in seeds:
        try:
            scenario(seed)
        except Exception as err:
            return SeedFailure(seed, err)
    return None


def run_seeds(scenario: Callable[[int], object], test_id: str, default: int = DEFAULT_SEEDS) -> int:
    """Run ``scenario`` over the seeds of the environment; fail naming the first failing seed.
    Returns how many seeds ran."""
    seeds = seeds_from_env(default)
    failure = find_failing_seed(scenario, seeds)
    if failure is not None:
        message = failure.describe(test_id)
        print(message)
        raise AssertionError(message)
    return len(seeds)
