"""The bootstrap metadata of a new cluster (Kafka's ``bootstrap.checkpoint``, KIP-900).

``kraftlog storage format --add-scram ...`` writes the records a cluster must hold before anyone can
log in to it (today: SCRAM credentials, so a cluster whose listeners all want SCRAM needs no
plaintext door to create its first user) into ``<metadata.log.dir>/bootstrap.checkpoint``, in the
snapshot file format (mode 0600: it holds the credentials' keys, never a password).

Ordering rule: the first active controller of an empty metadata log commits these records in the
same batch as its first NoOp (`ControllerServer._become_active`), so they are in the log before any
broker registers or any other decision is taken. A later leader whose image is still empty (the
first batch's outcome unknown to it) proposes them again; the records are upserts of the same
credentials, so doing so twice leaves the same image.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from kraftlog.common import private_directory
from kraftlog.metadata_log import MetadataRecord, encode_record, read_snapshot
from kraftlog.metadata_log.log_files import write_snapshot_payloads

__all__ = ["BOOTSTRAP_FILE", "read_bootstrap_records", "write_bootstrap_records"]

#: Kafka's file name, in the metadata log dir (beside the ``__cluster_metadata-0`` partition dir)
BOOTSTRAP_FILE = "bootstrap.checkpoint"


def write_bootstrap_records(metadata_log_dir: str | Path, records: Sequence[MetadataRecord]) -> Path:
    """Write ``records`` as the bootstrap metadata of the node whose metadata log dir this is
    (created, owner-only, when missing)."""
    directory = Path(metadata_log_dir)
    if not directory.exists():  # a dir kraftlog creates for the cluster: only its owner enters it
        private_directory(directory)
    path = directory / BOOTSTRAP_FILE
    return write_snapshot_payloads(path, 0, 0, int(time.time() * 1000), [encode_record(r) for r in records])


def read_bootstrap_records(metadata_log_dir: str | Path) -> list[MetadataRecord]:
    """The bootstrap records of this metadata log dir; none when it holds no bootstrap file.

    A corrupt file raises what `read_snapshot` raises: the controller must not start a cluster
    without the credentials its operator asked for."""
    path = Path(metadata_log_dir) / BOOTSTRAP_FILE
    if not path.exists():
        return []
    return list(read_snapshot(path).records)
