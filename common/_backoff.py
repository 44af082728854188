"""Kafka's retry back-off (KIP-580): exponential growth with jitter, capped.

``retry.backoff.ms * 2**attempt``, capped at ``retry.backoff.max.ms``, then scaled by a random factor
in ``[1 - jitter, 1 + jitter]`` (Kafka's 0.2) so that clients that failed together do not retry in
lockstep. The generator is a parameter so callers and tests stay deterministic.
"""

from __future__ import annotations

import random

__all__ = ["backoff_ms"]


def backoff_ms(
    attempt: int, *, base_ms: float, max_ms: float, rng: random.Random | None = None, jitter: float = 0.2
) -> float:
    """The wait before retry number ``attempt`` (0 for the first retry), in milliseconds."""
    if attempt < 0:
        raise ValueError("attempt must be >= 0")
    exp = min(float(base_ms) * (2.0 ** min(attempt, 32)), float(max_ms))
    if jitter <= 0:
        return exp
    factor = (rng or random).uniform(1.0 - jitter, 1.0 + jitter)
    return min(exp * factor, float(max_ms) * (1.0 + jitter))
