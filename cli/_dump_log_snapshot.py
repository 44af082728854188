"""``kraftlog dump-log`` of a producer state snapshot (``<offset>.snapshot``), as Kafka's
DumpLogSegments prints one: each producer's id, epoch, coordinator epoch, open transaction and its
last batch (sequences, offset, timestamp)."""

from __future__ import annotations

from pathlib import Path

from kraftlog.cli._common import JsonObjectStream
from kraftlog.cli._dump_log_scan import DumpOptions
from kraftlog.storage import ProducerStateManager

__all__ = ["SNAPSHOT_SUFFIX", "dump_producer_snapshot"]

SNAPSHOT_SUFFIX = ".snapshot"


def dump_producer_snapshot(path: Path, options: DumpOptions) -> bool:
    """Print the entries; a corrupt snapshot raises (CORRUPT_MESSAGE), reported by the caller."""
    entries = ProducerStateManager.read_snapshot(path)
    rows = []
    for e in entries:
        last = e.batches[-1] if e.batches else None
        rows.append(
            {
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_first_offset": e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None,
                "last_timestamp": e.last_timestamp,
                "first_sequence": last.first_seq if last else -1,
                "last_sequence": last.last_seq if last else -1,
                "last_offset": last.last_offset if last else -1,
                "offset_delta": last.offset_delta if last else 0,
                "timestamp": last.timestamp if last else -1,
            }
        )
    if options.json:
        stream = JsonObjectStream({"file": str(path), "type": "producer_snapshot"}, "producers")
        for row in rows:
            stream.item(row)
        stream.close()
        return True
    print(f"Dumping {path}")
    for r in rows:
        txn = r["current_txn_first_offset"] if r["current_txn_first_offset"] is not None else "None"
        print(
            f"producerId: {r['producer_id']} producerEpoch: {r['producer_epoch']} "
            f"coordinatorEpoch: {r['coordinator_epoch']} currentTxnFirstOffset: {txn} "
            f"lastTimestamp: {r['last_timestamp']} firstSequence: {r['first_sequence']} "
            f"lastSequence: {r['last_sequence']} lastOffset: {r['last_offset']} "
            f"offsetDelta: {r['offset_delta']} timestamp: {r['timestamp']}"
        )
    return True
