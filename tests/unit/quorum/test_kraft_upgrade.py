"""The upgrade of a static quorum to kraft.version 1 (issue 26, KIP-853 / KIP-1170): the pure voter
set rules, the Raft entry, the voters' reports on the wire, the feature checks and the controller's
steps, each on its own (no processes, no sockets)."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace
from typing import Any

import msgpack
import pytest

import kraftlog.quorum.controller as ctl
from kraftlog.common.errors import CorruptMessageError
from kraftlog.proto import admin_pb2, errors_pb2
from kraftlog.quorum._kraft_upgrade import kraft_upgrade_problem, upgrade_kraft_version
from kraftlog.quorum.raft import KRaftUpgrade, RaftVoter, VoterChangeError, kraft_version_of, upgraded_voter_set
from kraftlog.quorum.raft._membership import (
    VOTER_ADD,
    VoterChange,
    apply_voter_change,
    decode_voter_change,
    encode_voter_change,
    pending_voter_change,
    revert_voter_change,
    voters_in_force,
)
from kraftlog.quorum.raft._raft_messages import VOTER_REPORT, decode_message, encode_message
from kraftlog.quorum.raft._raft_voters import KRAFT_VERSION_MAX, _VoterChangesNode
from tests.unit.quorum.test_controller import Harness

DIRS = {1: "AAAAAAAAAAAAAAAAAAAAAQ", 2: "AAAAAAAAAAAAAAAAAAAAAg", 3: "AAAAAAAAAAAAAAAAAAAAAw"}
STATIC = {vid: RaftVoter(vid, "127.0.0.1", 9000 + vid, None, f"key{vid}") for vid in (1, 2, 3)}
REPORTS = {vid: (DIRS[vid], 1) for vid in (1, 2, 3)}


def _command(change: Any) -> bytes:
    return b"\x00" + encode_voter_change(change)


# ------------------------------------------------------------------ the voter set rules


def test_the_upgraded_set_is_the_static_one_with_every_reported_directory_id() -> None:
    upgraded = upgraded_voter_set(STATIC, REPORTS)
    assert [(v.node_id, v.address, v.directory_id, v.public_key) for v in upgraded] == [
        (vid, STATIC[vid].address, DIRS[vid], f"key{vid}") for vid in (1, 2, 3)
    ]
    assert kraft_version_of(STATIC) == 0 and kraft_version_of({v.node_id: v for v in upgraded}) == 1
    assert kraft_version_of({}) == 0


@pytest.mark.parametrize(
    ("reports", "needle"),
    [
        ({1: (DIRS[1], 1), 2: (DIRS[2], 1)}, "[3] have not reported"),
        ({**REPORTS, 2: (DIRS[2], 0)}, "not all of the voters support kraft.version 1: [2]"),
        ({**REPORTS, 3: (None, 1)}, "directory id must be known for every voter: [3]"),
    ],
)
def test_an_upgrade_needs_every_voter_reported_with_a_directory_id_and_version_1(
    reports: dict[int, tuple[str | None, int]], needle: str
) -> None:
    with pytest.raises(VoterChangeError) as err:
        upgraded_voter_set(STATIC, reports)
    assert needle in str(err.value)


def test_a_dynamic_set_is_not_upgraded_again() -> None:
    dynamic = {v.node_id: v for v in upgraded_voter_set(STATIC, REPORTS)}
    with pytest.raises(VoterChangeError, match="already at kraft.version 1"):
        upgraded_voter_set(dynamic, REPORTS)
    with pytest.raises(VoterChangeError, match="already at kraft.version 1"):
        apply_voter_change(dynamic, KRaftUpgrade(tuple(dynamic.values())))


def test_the_upgrade_entry_round_trips_applies_reverts_and_counts_as_a_pending_change() -> None:
    change = KRaftUpgrade(upgraded_voter_set(STATIC, REPORTS))
    command = _command(change)
    assert decode_voter_change(command) == change
    after = apply_voter_change(STATIC, change)
    assert {vid: v.directory_id for vid, v in after.items()} == DIRS
    assert revert_voter_change(after, change) == STATIC
    # in force on append, gone once truncated away; one change at a time counts it
    assert voters_in_force(STATIC, [command]) == after
    assert voters_in_force(STATIC, []) == STATIC
    assert pending_voter_change([(command, 7, 2)]) == 7
    # the next change applies to the dynamic set
    four = RaftVoter(4, "127.0.0.1", 9004, "AAAAAAAAAAAAAAAAAAAABA", "key4")
    assert set(voters_in_force(STATIC, [command, _command(VoterChange(VOTER_ADD, four))])) == {1, 2, 3, 4}


def test_an_upgrade_naming_another_voter_set_is_refused_where_it_applies() -> None:
    moved = tuple(dataclasses.replace(v, port=v.port + 100) for v in upgraded_voter_set(STATIC, REPORTS))
    with pytest.raises(VoterChangeError, match="not the voter set"):
        apply_voter_change(STATIC, KRaftUpgrade(moved))
    missing = upgraded_voter_set(STATIC, REPORTS)[:2]
    with pytest.raises(VoterChangeError, match="not the voter set"):
        apply_voter_change(STATIC, KRaftUpgrade(missing))
    # a skipped change leaves the set in force as it was
    assert voters_in_force(STATIC, [_command(KRaftUpgrade(moved))]) == STATIC


def test_an_upgrade_entry_without_voters_is_corrupt() -> None:
    with pytest.raises(CorruptMessageError, match="names no voters"):
        decode_voter_change(_command(KRaftUpgrade(())))


# ------------------------------------------------------------------ the voters' reports


def test_a_voter_report_is_a_known_message_of_an_exact_shape() -> None:
    report = {"type": VOTER_REPORT, "dir": DIRS[1], "kraft_max": 1}
    assert decode_message(encode_message(report)) == report
    assert decode_message(encode_message({**report, "dir": None}))["dir"] is None
    for bad in ({**report, "dir": 5}, {**report, "kraft_max": -1}, {**report, "id": 3}, {"type": VOTER_REPORT}):
        with pytest.raises(CorruptMessageError):
            decode_message(encode_message(bad))


def test_a_report_is_kept_under_the_id_its_connection_authenticated() -> None:
    node = SimpleNamespace(_kl_applied_voters=STATIC, _kl_voter_reports={}, _kl_node_id=1, _kl_directory_id=DIRS[1])
    peer = SimpleNamespace(id=STATIC[2].address)  # a voter's pysyncobj node: its address only
    _VoterChangesNode._kl_on_voter_report(node, peer, {"dir": DIRS[2], "kraft_max": 1})
    _VoterChangesNode._kl_on_voter_report(node, SimpleNamespace(id="10.0.0.9:1"), {"dir": "x", "kraft_max": 1})
    assert _VoterChangesNode.kl_voter_reports(node) == {2: (DIRS[2], 1), 1: (DIRS[1], KRAFT_VERSION_MAX)}


# ------------------------------------------------------------------ the feature checks


def _request(levels: dict[str, int], *, kind: int = 1, validate_only: bool = False) -> Any:
    return admin_pb2.UpdateFeaturesRequest(
        updates=[
            admin_pb2.UpdateFeaturesRequest.FeatureUpdate(feature=n, max_version_level=v, upgrade_type=kind)
            for n, v in levels.items()
        ],
        validate_only=validate_only,
    )


def test_kraft_version_passes_the_feature_checks_only_when_the_quorum_can_move() -> None:
    h = Harness()
    ready = dataclasses.replace(h.ctx(), kraft_upgrade_problem=None)
    records, resp = ctl.update_features(h.image, _request({"kraft.version": 1}), ready)
    assert resp.error.name == "NONE" and records == []  # never a FeatureLevelRecord: the Raft entry is it
    blocked = dataclasses.replace(h.ctx(), kraft_upgrade_problem="voter(s) [3] have not reported")
    records, resp = ctl.update_features(h.image, _request({"kraft.version": 1}), blocked)
    assert resp.error.name == "INVALID_UPDATE_VERSION" and records == []
    assert "dynamic controller quorum" in resp.error.message and "[3] have not reported" in resp.error.message
    # on its own only: the other features go through the metadata log
    _, resp = ctl.update_features(h.image, _request({"kraft.version": 1, "group.version": 1}), ready)
    assert resp.error.name == "INVALID_UPDATE_VERSION" and "request of its own" in resp.error.message


def test_kraft_version_is_the_quorums_and_is_never_downgraded() -> None:
    h = Harness()
    dynamic = dataclasses.replace(h.ctx(), kraft_version=1, kraft_upgrade_problem=None)
    described = ctl.describe_features(h.image, dynamic)
    assert {f.name: f.level for f in described.finalized}["kraft.version"] == 1
    assert {s.name: s.max_version for s in described.supported}["kraft.version"] == 1
    assert "kraft.version" not in {f.name for f in ctl.describe_features(h.image, h.ctx()).finalized}
    _, resp = ctl.update_features(h.image, _request({"kraft.version": 0}, kind=2), dynamic)
    assert resp.error.name == "INVALID_UPDATE_VERSION" and "downgrade" in resp.error.message
    records, resp = ctl.update_features(h.image, _request({"kraft.version": 1}), dynamic)
    assert resp.error.name == "NONE" and records == []


# ------------------------------------------------------------------ the controller's steps


class _Quorum:
    def __init__(self, *, leader: bool = True, pending: int | None = None, reports: Any = None) -> None:
        self.is_leader = leader
        self.pending = pending
        self.reports = REPORTS if reports is None else reports
        self.changes: list[Any] = []
        self._voters = dict(STATIC)

    def voter_change_view(self) -> tuple[int, int | None, dict[int, Any]]:
        return 10, self.pending, {}

    def voters(self) -> dict[int, RaftVoter]:
        return dict(self._voters)

    def voter_reports(self) -> dict[int, tuple[str | None, int]]:
        return dict(self.reports)

    async def change_voters(self, change: Any, *, timeout_s: float) -> None:
        self.changes.append(change)
        self._voters = apply_voter_change(self._voters, change)

    @property
    def kraft_version(self) -> int:
        return kraft_version_of(self._voters)


def _upgrade(quorum: _Quorum, **kw: Any) -> Any:
    server = SimpleNamespace(quorum=quorum, kraft_version=quorum.kraft_version)
    checked = admin_pb2.UpdateFeaturesResponse(error=errors_pb2.Error(code=0, name="NONE"))
    return asyncio.run(upgrade_kraft_version(server, _request({"kraft.version": 1}, **kw), checked))


def test_the_active_controller_appends_the_upgrade_and_the_quorum_is_dynamic() -> None:
    quorum = _Quorum()
    assert kraft_upgrade_problem(quorum) is None
    assert _upgrade(quorum).error.name == "NONE"
    assert quorum.changes == [KRaftUpgrade(upgraded_voter_set(STATIC, REPORTS))] and quorum.kraft_version == 1
    assert _upgrade(quorum).error.name == "NONE" and len(quorum.changes) == 1  # already there: nothing appended


@pytest.mark.parametrize(
    ("quorum", "error"),
    [
        (_Quorum(leader=False), "NOT_CONTROLLER"),
        (_Quorum(pending=12), "REQUEST_TIMED_OUT"),
        (_Quorum(reports={1: (DIRS[1], 1)}), "INVALID_UPDATE_VERSION"),
    ],
)
def test_the_upgrade_is_refused_with_kafkas_errors(quorum: _Quorum, error: str) -> None:
    resp = _upgrade(quorum)
    assert resp.error.name == error and [r.error.name for r in resp.results] == [error]
    assert quorum.changes == [] and quorum.kraft_version == 0


def test_validate_only_appends_nothing_and_no_quorum_is_a_problem() -> None:
    quorum = _Quorum()
    assert _upgrade(quorum, validate_only=True).error.name == "NONE" and quorum.changes == []
    assert kraft_upgrade_problem(None) is not None
    assert "[2, 3] have not reported" in str(kraft_upgrade_problem(_Quorum(reports={1: (DIRS[1], 1)})))


# ------------------------------------------------------------------ the metadata log's records of a change


def test_a_change_carries_the_set_after_it_and_old_entries_still_decode() -> None:
    four = RaftVoter(4, "127.0.0.1", 9004, "AAAAAAAAAAAAAAAAAAAABA", "key4")
    dynamic = {v.node_id: v for v in upgraded_voter_set(STATIC, REPORTS)}
    after = tuple(apply_voter_change(dynamic, VoterChange(VOTER_ADD, four)).values())
    change = VoterChange(VOTER_ADD, four, timestamp_ms=123, voters_after=after)
    assert decode_voter_change(_command(change)) == change
    voter = {"id": 4, "host": "127.0.0.1", "port": 9004, "directory.id": four.directory_id, "public.key": "key4"}
    old_shape = b"\x00" + msgpack.packb([2, VOTER_ADD, voter])  # an entry of the build before the time
    assert decode_voter_change(old_shape) == VoterChange(VOTER_ADD, four)


def test_the_records_come_from_the_entry_even_where_the_local_set_cannot_take_it() -> None:
    from kraftlog.metadata_log import VotersRecord, decode_record

    dynamic = {v.node_id: v for v in upgraded_voter_set(STATIC, REPORTS)}
    three = dynamic[3]
    after = tuple(v for vid, v in sorted(dynamic.items()) if vid != 3)
    removal = VoterChange("remove", three, timestamp_ms=55, voters_after=after)
    appended: list[tuple[int, list[bytes]]] = []
    # a controller that joined late, seeded with the set after the removal: it cannot apply it
    node: Any = SimpleNamespace(
        _kl_applied_voters={vid: v for vid, v in dynamic.items() if vid != 3},
        _kl_port_offset=1,
        raftLastApplied=9,
        _kl_log=SimpleNamespace(warning=lambda *a, **k: None, info=lambda *a, **k: None),
        _kl_append_control=lambda ts, records: appended.append((ts, records)),
    )
    node._kl_control_records = lambda c, a, o: _VoterChangesNode._kl_control_records(node, c, a, o)
    result = _VoterChangesNode._kl_apply_voter_change(node, _command(removal))
    assert result[0] != 4  # not applied here (APPLY_VOTERS is 4)...
    [(ts, records)] = appended  # ...and still the same VotersRecord as everywhere else
    record = decode_record(records[0])
    assert ts == 55 and isinstance(record, VotersRecord)
    assert [(v.voter_id, v.voter_directory_id, v.endpoints[0].port) for v in record.voters] == [
        (1, DIRS[1], 9000), (2, DIRS[2], 9001)
    ]  # fmt: skip


def test_a_restarted_controller_knows_its_quorum_was_upgraded_from_the_set_it_kept(tmp_path: Any) -> None:
    from kraftlog.common import RAFT_DIR
    from kraftlog.quorum._quorum_identity import kept_kraft_version
    from kraftlog.quorum.raft import VOTERS_FILE, write_voters_file

    raft = tmp_path / RAFT_DIR
    raft.mkdir()
    assert kept_kraft_version(tmp_path) == 0  # no file: a static quorum as configured
    write_voters_file(raft, STATIC)
    assert kept_kraft_version(tmp_path) == 0  # a static quorum keeps its set too, without directory ids
    write_voters_file(raft, {v.node_id: v for v in upgraded_voter_set(STATIC, REPORTS)})
    assert kept_kraft_version(tmp_path) == 1
    (raft / VOTERS_FILE).write_bytes(b"\xc1")
    assert kept_kraft_version(tmp_path) == 0  # undecodable: the Raft log still says who votes
