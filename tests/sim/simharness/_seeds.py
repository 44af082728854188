"""Which seeds a scenario runs, and what a failure prints: the seed and the command that replays it.

``KRAFTLOG_SIM_SEED=N`` runs that one seed (replay); ``KRAFTLOG_SIM_SEEDS=N`` runs seeds 0..N-1
(default: `DEFAULT_SEEDS`), ``KRAFTLOG_SIM_SEED_START`` shifts the range (to split a long run).
A run of many seeds is spread over worker processes, one per core the process may use
(``KRAFTLOG_SIM_WORKERS`` overrides; 1 runs them here): each seed is a run of its own, so the
failure reported is still the lowest failing seed, whichever worker ran it.
Runs do not depend on hash randomization (the same seed gave the same run under PYTHONHASHSEED 0,
1 and 12345); the replay command still fixes ``PYTHONHASHSEED=0``, as `make sim` does, so that a
set iterated in a new place cannot make a replay differ.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import structlog

__all__ = [
    "DEFAULT_SEEDS",
    "SeedFailure",
    "find_failing_seed",
    "find_failing_seed_in_workers",
    "run_seeds",
    "seeds_from_env",
    "workers_from_env",
]

DEFAULT_SEEDS = 1000


def seeds_from_env(default: int = DEFAULT_SEEDS) -> list[int]:
    one = os.environ.get("KRAFTLOG_SIM_SEED")
    if one:
        return [int(one)]
    count = int(os.environ.get("KRAFTLOG_SIM_SEEDS", default))
    start = int(os.environ.get("KRAFTLOG_SIM_SEED_START", 0))
    return list(range(start, start + count))


#: seeds a worker runs per task: small enough that a failure stops the others soon
_CHUNK_SEEDS = 20


@dataclass(frozen=True)
class SeedFailure:
    seed: int
    error: BaseException
    #: the traceback as text, for a failure in a worker process (its exception stays there)
    traceback_text: str | None = None

    def describe(self, test_id: str) -> str:
        tb = self.traceback_text or "".join(traceback.format_exception(self.error))
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


def workers_from_env(seed_count: int) -> int:
    """Worker processes for ``seed_count`` seeds: ``KRAFTLOG_SIM_WORKERS``, else the cores this
    process may use; never more than one per chunk of seeds."""
    wanted = int(os.environ.get("KRAFTLOG_SIM_WORKERS", 0)) or len(os.sched_getaffinity(0))
    return max(1, min(wanted, -(-seed_count // _CHUNK_SEEDS)))


def _quiet_worker(harness_paths: list[str]) -> None:
    """A worker's start: the harness and the test modules importable (scenarios are pickled by
    name), and only fatal logs, as in the pytest process (`conftest._quiet_logs`)."""
    for path in reversed(harness_paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


def _run_chunk(scenario: Callable[[int], object], seeds: Sequence[int]) -> tuple[int, str, str] | None:
    """In a worker: the first failing seed of ``seeds`` as (seed, repr, traceback text), or None."""
    failure = find_failing_seed(scenario, seeds)
    if failure is None:
        return None
    return failure.seed, repr(failure.error), "".join(traceback.format_exception(failure.error))


def find_failing_seed_in_workers(
    scenario: Callable[[int], object], seeds: Sequence[int], workers: int
) -> SeedFailure | None:
    """`find_failing_seed` over ``workers`` processes (spawned, so no thread or lock of this
    process is copied): chunks in seed order, the lowest failing seed wins; once a chunk fails,
    chunks after it are not started."""
    chunks = [seeds[i : i + _CHUNK_SEEDS] for i in range(0, len(seeds), _CHUNK_SEEDS)]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=_quiet_worker, initargs=([here, *sys.path],)
    ) as pool:
        futures = [pool.submit(_run_chunk, scenario, chunk) for chunk in chunks]
        for index, future in enumerate(futures):
            found = future.result()
            if found is not None:
                for later in futures[index + 1 :]:
                    later.cancel()
                seed, error_repr, tb = found
                return SeedFailure(seed, AssertionError(error_repr), traceback_text=tb)
    return None


def run_seeds(scenario: Callable[[int], object], test_id: str, default: int = DEFAULT_SEEDS) -> int:
    """Run ``scenario`` over the seeds of the environment; fail naming the first failing seed.
    Returns how many seeds ran."""
    seeds = seeds_from_env(default)
    workers = workers_from_env(len(seeds))
    if workers > 1:
        failure = find_failing_seed_in_workers(scenario, seeds, workers)
    else:
        failure = find_failing_seed(scenario, seeds)
    if failure is not None:
        message = failure.describe(test_id)
        print(message)
        raise AssertionError(message)
    return len(seeds)
