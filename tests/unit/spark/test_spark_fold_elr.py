"""The Spark snapshot job folds the KIP-966 fields (issue 26) as in-process replay does: ELR and
last known ELR of PartitionRecord / PartitionChangeRecord, the features of a broker registration
and the FeatureLevelRecords, byte for byte the same snapshot."""

from __future__ import annotations

from pathlib import Path

from kraftlog.metadata_log import (
    FeatureLevelRecord,
    MetadataImage,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)
from tests.unit.spark.test_spark_fold_security import _replay, _spark_fold, _write_log

TID = "8f3c2c8e-5b0a-4c2e-9d6e-1b2a3c4d5e6f"


def _records() -> list[MetadataRecord]:
    return [
        FeatureLevelRecord("metadata.version", 25),
        FeatureLevelRecord("eligible.leader.replicas.version", 1),
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id="i1",
            broker_epoch=2,
            features=(("metadata.version", 7, 25), ("eligible.leader.replicas.version", 0, 1)),
        ),
        TopicRecord("t", TID),
        PartitionRecord(partition_id=0, topic_id=TID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1),
        PartitionRecord(
            partition_id=1, topic_id=TID, replicas=(1, 2, 3), isr=(), leader=-1, eligible_leader_replicas=(2, 3)
        ),
        PartitionChangeRecord(
            partition_id=0, topic_id=TID, isr=(1,), eligible_leader_replicas=(2,), last_known_elr=(3,)
        ),
        PartitionChangeRecord(partition_id=1, topic_id=TID, isr=(2,), leader=2, eligible_leader_replicas=(3,)),
        PartitionChangeRecord(partition_id=1, topic_id=TID, leader_recovery_state=0),  # ELR untouched by this one
    ]


def test_elr_fold_equals_in_process_replay(tmp_path: Path) -> None:
    entries = _write_log(tmp_path, _records())
    image = _replay(MetadataImage.EMPTY, entries)
    payloads, errors = _spark_fold(tmp_path, cut=entries[-1].offset)
    assert errors == []
    assert payloads == [encode_record(r) for r in image.to_records()]
    p0, p1 = image.topics.partition(TID, 0), image.topics.partition(TID, 1)
    assert p0 is not None and p1 is not None
    assert (p0.elr, p0.last_known_elr, p1.elr, p1.leader) == ((2,), (3,), (3,), 2)
    broker = image.cluster.broker(1)
    assert broker is not None and broker.supported_range("eligible.leader.replicas.version") == (0, 1)
