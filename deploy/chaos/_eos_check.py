"""The exactly-once checker of ``kraftlog chaos run --workload eos``: the input topic A as read back,
the transaction attempts the processors recorded, and the output topic B read twice (read_committed
and read_uncommitted). Pure: no I/O, so every verdict is unit-tested.

Each output record's value is ``"<in partition>:<in offset>:<attempt>:<input value>"``
(`encode_output`): the input record it was made from and the transaction attempt that sent it, an
id unique over the whole run (the same input is processed again after an abort, under a new
attempt id), so an output tells which transaction it belongs to.

* ``eos_violations``: an input record of A whose output is missing from B's committed data
  (``eos_missing``), there more than once (``eos_doubled``), or an output that does not match its
  input (``eos_mismatched``: another partition of B than the input's, an input offset that holds
  another value or nothing, an undecodable value, an attempt no processor recorded);
* ``aborted_visible``: committed-read output records of an attempt recorded as aborted;
* ``partial_txns``: attempts recorded as committed with fewer of their outputs visible than they
  sent (partly or not at all), and attempts of unknown outcome (the commit raised and the abort
  was refused) with some but not all of them visible: a transaction is all or nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from kraftlog.deploy.chaos._checker import ReadRecord

__all__ = ["EosReport", "OUTCOMES", "TxnAttempt", "check_eos", "decode_output", "encode_output"]

#: a transaction attempt's outcome: committed (commit_transaction returned), aborted (abort_transaction
#: returned, or the commit was never asked for: the coordinator aborts it), unknown (the commit raised
#: and the abort did not succeed: the coordinator decides, committed or aborted as a whole)
OUTCOMES = ("committed", "aborted", "unknown")


@dataclass(frozen=True, slots=True)
class TxnAttempt:
    """One transaction of a processor: the inputs ``(partition, offset)`` whose outputs it sent."""

    attempt: str
    processor: str
    inputs: tuple[tuple[int, int], ...]
    outcome: str
    why: str = ""  # aborted: "deliberate", "crash" (abandoned open), or the error


def encode_output(in_partition: int, in_offset: int, attempt: str, original: bytes | None) -> bytes:
    if ":" in attempt:
        raise ValueError(f"an attempt id holds no ':' ({attempt!r})")
    return f"{in_partition}:{in_offset}:{attempt}:".encode() + (original or b"")


def decode_output(value: bytes | None) -> tuple[int, int, str, bytes] | None:
    """``(in partition, in offset, attempt, input value)`` of an output record, None for anything else."""
    if value is None:
        return None
    try:
        p, o, attempt, original = value.split(b":", 3)
        return int(p), int(o), attempt.decode(), original
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass
class EosReport:
    inputs: int = 0
    outputs_committed: int = 0
    outputs_in_log: int = 0
    eos_missing: int = 0
    eos_doubled: int = 0
    eos_mismatched: int = 0
    aborted_visible: int = 0
    aborted_in_log: int = 0  # outputs of aborted attempts in the log (read_uncommitted): what was hidden
    partial_txns: int = 0
    txns_committed: int = 0
    txns_aborted: int = 0
    txns_unknown: int = 0
    unknown_visible: int = 0  # unknown attempts the coordinator committed (all outputs visible)
    examples: list[str] = field(default_factory=list)

    @property
    def eos_violations(self) -> int:
        return self.eos_missing + self.eos_doubled + self.eos_mismatched

    @property
    def ok(self) -> bool:
        return self.eos_violations == 0 and self.aborted_visible == 0 and self.partial_txns == 0


def check_eos(
    inputs: Iterable[ReadRecord],
    attempts: Iterable[TxnAttempt],
    committed: Iterable[ReadRecord],
    uncommitted: Iterable[ReadRecord] = (),
    *,
    examples: int = 5,
) -> EosReport:
    """``inputs``: every record of A; ``committed`` / ``uncommitted``: every record of B read with
    read_committed / read_uncommitted; ``attempts``: every transaction attempt of the processors."""
    report = EosReport()

    def example(text: str) -> None:
        if len(report.examples) < examples:
            report.examples.append(text)

    by_ref = {(r.partition, r.offset): r.value for r in inputs}
    report.inputs = len(by_ref)
    known = {a.attempt: a for a in attempts}
    for a in known.values():
        if a.outcome == "committed":
            report.txns_committed += 1
        elif a.outcome == "aborted":
            report.txns_aborted += 1
        else:
            report.txns_unknown += 1
    seen: Counter[tuple[int, int]] = Counter()
    visible: Counter[str] = Counter()
    for rec in committed:
        report.outputs_committed += 1
        decoded = decode_output(rec.value)
        attempt = known.get(decoded[2]) if decoded is not None else None
        if decoded is None or attempt is None:
            report.eos_mismatched += 1
            example(f"B {rec.partition}@{rec.offset}: not an output of a recorded attempt ({rec.value!r:.60})")
            continue
        in_p, in_off, _, original = decoded
        ref = (in_p, in_off)
        visible[attempt.attempt] += 1
        if attempt.outcome == "aborted":
            report.aborted_visible += 1
            example(f"B {rec.partition}@{rec.offset}: output of aborted attempt {attempt.attempt} ({attempt.why})")
        if rec.partition != in_p or by_ref.get(ref) != original:
            report.eos_mismatched += 1
            example(f"B {rec.partition}@{rec.offset}: input A {in_p}@{in_off} does not hold {original!r:.40}")
            continue
        seen[ref] += 1
        if seen[ref] == 2:
            example(f"A {in_p}@{in_off}: output committed twice (again by attempt {attempt.attempt})")
    for ref in by_ref:
        if seen[ref] == 0:
            report.eos_missing += 1
            example(f"A {ref[0]}@{ref[1]}: no committed output")
    report.eos_doubled = sum(n - 1 for n in seen.values() if n > 1)
    for a in known.values():
        n = visible[a.attempt]
        sent = len(a.inputs)
        if a.outcome == "committed" and n < sent:
            report.partial_txns += 1
            example(f"committed attempt {a.attempt}: {n} of {sent} outputs visible")
        elif a.outcome == "unknown":
            if 0 < n < sent:
                report.partial_txns += 1
                example(f"attempt {a.attempt} of unknown outcome: {n} of {sent} outputs visible")
            elif n and n >= sent:
                report.unknown_visible += 1
    for rec in uncommitted:
        report.outputs_in_log += 1
        decoded = decode_output(rec.value)
        owner = known.get(decoded[2]) if decoded is not None else None
        if owner is not None and owner.outcome == "aborted":
            report.aborted_in_log += 1
    return report
