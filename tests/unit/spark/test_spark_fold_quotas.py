"""The Spark snapshot job folds ClientQuotaRecords (issue 24) as in-process replay does: byte for
byte the same snapshot, from a log alone and on top of a base snapshot."""

from __future__ import annotations

from pathlib import Path

from kraftlog.metadata_log import (
    ClientQuotaRecord,
    LogEntry,
    MetadataImage,
    MetadataLogWriter,
    encode_record,
    write_snapshot,
)
from tests.unit.spark.test_spark_fold_security import _replay, _spark_fold, _write_log

ALICE = (("user", "alice"),)
DEFAULT_CLIENT = (("client-id", None),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))


def _records() -> list[ClientQuotaRecord]:
    return [
        ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", value=1000),
        ClientQuotaRecord(entity=DEFAULT_CLIENT, key="consumer_byte_rate", value=2000),
        ClientQuotaRecord(entity=ALICE_APP, key="request_percentage", value=12.5),
        ClientQuotaRecord(entity=ALICE, key="consumer_byte_rate", value=3000),
        ClientQuotaRecord(entity=ALICE, key="producer_byte_rate", value=4000),  # replaces
        ClientQuotaRecord(entity=DEFAULT_CLIENT, key="consumer_byte_rate", remove=True),  # the entity goes
        ClientQuotaRecord(entity=ALICE_APP, key="controller_mutation_rate", value=2.5),
    ]


def test_quota_fold_equals_in_process_replay(tmp_path: Path) -> None:
    entries = _write_log(tmp_path, list(_records()))
    image = _replay(MetadataImage.EMPTY, entries)
    payloads, errors = _spark_fold(tmp_path, cut=entries[-1].offset)
    assert errors == []
    assert payloads == [encode_record(r) for r in image.to_records()]
    assert set(image.quotas.entities) == {ALICE, ALICE_APP}


def test_quota_fold_from_a_base_snapshot(tmp_path: Path) -> None:
    log = tmp_path / "log"
    first = _write_log(log, list(_records()[:4]))
    base = _replay(MetadataImage.EMPTY, first)
    snap = write_snapshot(tmp_path / "snap", base.offset, base.epoch, base.timestamp_ms, base.to_records())
    rest = _records()[4:]
    more = [LogEntry(base.offset + 1 + i, 2, 1_800_000_000_000 + i, r) for i, r in enumerate(rest)]
    with MetadataLogWriter(log, segment_bytes=300, fsync=False) as w:
        w.append(more)
    image = _replay(base, more)
    payloads, errors = _spark_fold(log, cut=more[-1].offset, skip_through=base.offset, snapshot=snap)
    assert errors == []
    assert payloads == [encode_record(r) for r in image.to_records()]


def test_quota_fold_reports_what_replay_refuses(tmp_path: Path) -> None:
    bad = ClientQuotaRecord(entity=(("group", "g"),), key="producer_byte_rate", value=1)
    entries = _write_log(tmp_path, [*_records(), bad])
    _payloads, errors = _spark_fold(tmp_path, cut=entries[-1].offset)
    assert [(e[0], e[1]) for e in errors] == [(entries[-1].offset, "MetadataReplayError")]
