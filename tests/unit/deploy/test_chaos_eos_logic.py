"""The exactly-once checker of ``kraftlog chaos run --workload eos`` (issue 15): pure, no cluster."""

from __future__ import annotations

import argparse

import pytest

from kraftlog.cli._chaos import EOS_OWN_CLUSTER_OVERRIDES, add_parser, run
from kraftlog.cli._common import UserError
from kraftlog.deploy.chaos import WORKLOADS, ReadRecord, encode_value
from kraftlog.deploy.chaos._eos_check import TxnAttempt, check_eos, decode_output, encode_output

# A: partition 0 holds sequences 1..3 at offsets 0..2, partition 1 holds sequence 1 at offset 0
INPUTS = [ReadRecord(0, o, encode_value(0, o + 1)) for o in range(3)] + [ReadRecord(1, 0, encode_value(1, 1))]


def _out(b_offset: int, in_partition: int, in_offset: int, attempt: str, *, partition: int | None = None) -> ReadRecord:
    value = encode_output(in_partition, in_offset, attempt, encode_value(in_partition, in_offset + 1))
    return ReadRecord(in_partition if partition is None else partition, b_offset, value)


def _attempt(name: str, outcome: str, *refs: tuple[int, int], why: str = "") -> TxnAttempt:
    return TxnAttempt(name, name.split(".")[0], tuple(refs), outcome, why)


def _exactly_once() -> tuple[list[TxnAttempt], list[ReadRecord]]:
    attempts = [
        _attempt("p0.1", "committed", (0, 0), (0, 1)),
        _attempt("p0.2", "aborted", (0, 2), why="deliberate"),
        _attempt("p0.3", "committed", (0, 2)),
        _attempt("p1.1", "committed", (1, 0)),
    ]
    committed = [_out(0, 0, 0, "p0.1"), _out(1, 0, 1, "p0.1"), _out(4, 0, 2, "p0.3"), _out(0, 1, 0, "p1.1")]
    return attempts, committed


def test_output_values_round_trip() -> None:
    value = encode_output(2, 17, "p1.9", b"2:18")
    assert value == b"2:17:p1.9:2:18"
    assert decode_output(value) == (2, 17, "p1.9", b"2:18")
    assert decode_output(b"nonsense") is None and decode_output(None) is None and decode_output(b"x:1:a:") is None
    with pytest.raises(ValueError):
        encode_output(0, 0, "a:b", b"")


def test_exactly_once_passes_and_counts_aborted_data_in_the_log() -> None:
    attempts, committed = _exactly_once()
    uncommitted = [*committed, _out(2, 0, 2, "p0.2")]  # the aborted attempt's output is in the log
    r = check_eos(INPUTS, attempts, committed, uncommitted)
    assert r.ok and (r.eos_violations, r.aborted_visible, r.partial_txns) == (0, 0, 0)
    assert (r.inputs, r.outputs_committed, r.outputs_in_log, r.aborted_in_log) == (4, 4, 5, 1)
    assert (r.txns_committed, r.txns_aborted, r.txns_unknown) == (3, 1, 0)


def test_missing_output_is_a_violation() -> None:
    attempts, committed = _exactly_once()
    r = check_eos(INPUTS, attempts, [c for c in committed if c.partition != 1])
    assert (r.eos_missing, r.eos_violations) == (1, 1) and not r.ok
    assert r.partial_txns == 1  # p1.1 committed, nothing of it visible
    assert any("A 1@0: no committed output" in e for e in r.examples)


def test_output_committed_twice_is_a_violation() -> None:
    attempts, committed = _exactly_once()
    attempts.append(_attempt("p1.2", "committed", (1, 0)))  # a zombie processed it again
    r = check_eos(INPUTS, attempts, [*committed, _out(1, 1, 0, "p1.2")])
    assert (r.eos_doubled, r.eos_violations, r.aborted_visible, r.partial_txns) == (1, 1, 0, 0)


def test_aborted_output_visible() -> None:
    attempts, committed = _exactly_once()
    r = check_eos(INPUTS, attempts, [*committed, _out(2, 0, 2, "p0.2")])
    assert r.aborted_visible == 1 and r.eos_doubled == 1 and not r.ok  # also a second copy of A 0@2
    # the aborted attempt's output alone stands for the input: aborted_visible, not a violation
    alone = check_eos(
        INPUTS, attempts[:2] + attempts[3:], [c for c in committed if c.offset != 4] + [_out(2, 0, 2, "p0.2")]
    )
    assert (alone.aborted_visible, alone.eos_violations) == (1, 0)


def test_committed_transaction_partly_visible() -> None:
    attempts, committed = _exactly_once()
    r = check_eos(INPUTS, attempts, [c for c in committed if (c.partition, c.offset) != (0, 1)])
    assert (r.partial_txns, r.eos_missing) == (1, 1) and not r.ok


def test_unknown_outcome_is_all_or_nothing() -> None:
    attempts = [
        _attempt("p0.1", "unknown", (0, 0), (0, 1)),  # the coordinator committed it
        _attempt("p0.2", "unknown", (0, 2)),  # ... aborted this one
        _attempt("p0.3", "committed", (0, 2)),
        _attempt("p1.1", "committed", (1, 0)),
    ]
    committed = [_out(0, 0, 0, "p0.1"), _out(1, 0, 1, "p0.1"), _out(4, 0, 2, "p0.3"), _out(0, 1, 0, "p1.1")]
    r = check_eos(INPUTS, attempts, committed)
    assert r.ok and (r.txns_unknown, r.unknown_visible) == (2, 1)
    half = check_eos(INPUTS, attempts, [c for c in committed if c.offset != 1] + [_out(5, 0, 1, "p0.3")])
    assert half.partial_txns == 1 and not half.ok


def test_mismatched_outputs() -> None:
    attempts, committed = _exactly_once()
    wrong_partition = _out(9, 0, 0, "p0.1", partition=1)
    unknown_attempt = _out(10, 0, 1, "p7.1")
    wrong_value = ReadRecord(0, 11, encode_output(0, 2, "p0.3", b"0:99"))
    r = check_eos(
        INPUTS, attempts, [*committed, wrong_partition, unknown_attempt, wrong_value, ReadRecord(0, 12, b"x")]
    )
    assert r.eos_mismatched == 4 and r.eos_violations == 4 and r.eos_doubled == 0 and not r.ok


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["chaos", "run", *argv])


def test_eos_workload_option() -> None:
    assert "eos" in WORKLOADS
    args = _parse("--workload", "eos", "--eos-processors", "3")
    assert (args.workload, args.eos_processors) == ("eos", 3)
    assert _parse().eos_processors == 2
    with pytest.raises(UserError, match="--eos-processors must be >= 1"):
        run(_parse("--workload", "eos", "--eos-processors", "0"))
    with pytest.raises(UserError, match="--workload eos belongs to the data profile"):
        run(_parse("--workload", "eos", "--profile", "quorum"))
    assert EOS_OWN_CLUSTER_OVERRIDES["transaction.state.log.num.partitions"] == 6
