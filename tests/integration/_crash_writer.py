"""Writer process for test_crash_recovery: appends batches to a `storage.Log` until it is killed.

Usage: python _crash_writer.py <partition dir> <seed> <max seconds>

After each append returns it prints ``ACK <seq> <last_offset>`` and flushes stdout, so every line the
test reads names an append that the log acknowledged. Record keys are ``<seq>-<i>`` and values are
derived from the key, so the test can check that what recovery kept is a prefix of what was written.
The loop stops by itself after <max seconds> in case the test never kills it.
"""

from __future__ import annotations

import logging
import random
import sys
import time
from pathlib import Path

import structlog

# storage logs through structlog (to stdout by default): keep stdout for the acknowledgements only
structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
    logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
)

from kraftlog.storage import Log, build_batch  # noqa: E402

WRITER_CONFIG = {"segment_bytes": 32 * 1024, "index_interval_bytes": 1024}


def value_for(key: bytes) -> bytes:
    return key * (1 + len(key) % 7) + b"|" + bytes(reversed(key))


def main() -> None:
    from kraftlog.storage import LogConfig

    directory = Path(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    deadline = time.monotonic() + float(sys.argv[3])
    log = Log(directory, LogConfig(**WRITER_CONFIG), recovery_point=0, had_clean_shutdown=False)
    out = sys.stdout
    seq = 0
    epoch = 0
    while time.monotonic() < deadline:
        if rng.random() < 0.02:
            epoch += 1
        payload = []
        for _ in range(1 if rng.random() < 0.8 else rng.randrange(2, 4)):
            keys = [f"{seq}-{i}".encode() * rng.randrange(1, 40) for i in range(rng.randrange(1, 6))]
            payload.append(build_batch([(k, value_for(k)) for k in keys], timestamp_ms=time.time_ns() // 1_000_000))
        info = log.append_as_leader(b"".join(payload), epoch)
        out.write(f"ACK {seq} {info.last_offset}\n")
        out.flush()
        seq += 1
        if seq % 97 == 0:
            log.flush()
    log.close()


if __name__ == "__main__":
    main()
