"""The ground floor of kraftlog: what every layer may use, importing no other package of ours.

DESIGN.md §2: `cli, deploy -> client, node -> broker, quorum -> storage, metadata_log -> common`.
"""

from __future__ import annotations

from kraftlog.common._progress import Progress, progress

__all__ = ["Progress", "progress"]
