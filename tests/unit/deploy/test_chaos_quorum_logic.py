"""The quorum chaos profile's checker, fault choice and config phases: pure logic on synthetic inputs
(plus metadata log files written by the real writer into tmp_path). No cluster, no sleeps."""

from __future__ import annotations

import json
import random
import tomllib
from pathlib import Path

import pytest

from kraftlog.common import errors as kerr
from kraftlog.deploy.chaos import (
    QUORUM_FAULT_KINDS,
    AdminOp,
    FinalTopic,
    QuorumTimeouts,
    check_admin,
    choose_quorum_fault,
    diverged_controllers,
    find_duplicate_records,
    has_active_controller,
    no_active_stretches,
    replay_error_lines,
)
from kraftlog.deploy.chaos._quorum_check import ACKED, IN_DOUBT, REJECTED, voter_rejoined
from kraftlog.deploy.chaos._quorum_faults import read_config_values, write_config_values
from kraftlog.deploy.chaos._quorum_logs import read_controller_log
from kraftlog.deploy.chaos._quorum_workload import classify, is_stale_answer
from kraftlog.metadata_log import (
    LogEntry,
    MetadataLogWriter,
    NoOpRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kraftlog.proto import admin_pb2

# ------------------------------------------------------------------------------ admin bookkeeping


def op(
    kind: str, topic: str, outcome: str = ACKED, *, partitions: int = 0, config: tuple[str, str] | None = None
) -> AdminOp:
    return AdminOp(0, kind, topic, outcome, partitions=partitions, config=config)


def test_acknowledged_history_that_is_all_there_loses_nothing() -> None:
    ops = [
        op("create", "t1", partitions=2, config=("retention.ms", "1000")),
        op("alter_config", "t1", config=("retention.ms", "2000")),
        op("alter_config", "t1", config=("max.message.bytes", "5000")),
        op("create_partitions", "t1", partitions=4),
        op("create", "t2", partitions=1),
        op("delete", "t2"),
    ]
    final = {
        "t1": FinalTopic(4, {"retention.ms": "2000", "max.message.bytes": "5000"}),
        "someone-elses": FinalTopic(9, {"x": "y"}),
    }
    report = check_admin(ops, final)
    assert (report.acked, report.lost, report.unexplained, report.in_doubt) == (6, 0, 0, 0)


def test_an_acknowledged_create_that_is_absent_is_lost() -> None:
    report = check_admin([op("create", "t1", partitions=1)], {})
    assert report.lost == 1 and "create(1 partitions) of t1" in report.examples[0]


def test_an_acknowledged_delete_whose_topic_is_still_there_is_lost() -> None:
    report = check_admin([op("create", "t1", partitions=1), op("delete", "t1")], {"t1": FinalTopic(1)})
    assert report.lost == 1 and "delete of t1" in report.examples[0]


def test_partitions_and_configs_are_judged_by_the_last_acknowledgement() -> None:
    ops = [
        op("create", "t1", partitions=1),
        op("create_partitions", "t1", partitions=3),
        op("alter_config", "t1", config=("retention.ms", "7")),
    ]
    report = check_admin(ops, {"t1": FinalTopic(1, {"retention.ms": "7"})})
    assert report.lost == 1 and "partitions" in report.examples[0]
    report = check_admin(ops, {"t1": FinalTopic(3, {})})
    assert report.lost == 1 and "config:retention.ms" in report.examples[0]


@pytest.mark.parametrize("present", [True, False])
def test_in_doubt_operations_may_or_may_not_have_happened(present: bool) -> None:
    created_in_doubt = [op("create", "t1", IN_DOUBT, partitions=2)]
    final = {"t1": FinalTopic(2)} if present else {}
    assert check_admin(created_in_doubt, final).lost == 0
    deleted_in_doubt = [op("create", "t1", partitions=2), op("delete", "t1", IN_DOUBT)]
    report = check_admin(deleted_in_doubt, final)
    assert (report.lost, report.unexplained, report.in_doubt, report.acked) == (0, 0, 1, 1)


def test_in_doubt_config_after_an_acknowledged_one_accepts_either_value_only() -> None:
    ops = [
        op("create", "t1", partitions=1),
        op("alter_config", "t1", config=("retention.ms", "1")),
        op("alter_config", "t1", IN_DOUBT, config=("retention.ms", "2")),
    ]
    for value in ("1", "2"):
        assert check_admin(ops, {"t1": FinalTopic(1, {"retention.ms": value})}).lost == 0
    assert check_admin(ops, {"t1": FinalTopic(1, {"retention.ms": "3"})}).lost == 1
    assert check_admin(ops, {"t1": FinalTopic(1, {})}).lost == 1


def test_state_that_no_operation_explains_is_unexplained_not_lost() -> None:
    report = check_admin([op("create", "t1", REJECTED, partitions=1)], {"t1": FinalTopic(1)})
    assert (report.lost, report.unexplained, report.rejected) == (0, 1, 1)
    report = check_admin([op("create", "t1", partitions=1)], {"t1": FinalTopic(1, {"cleanup.policy": "compact"})})
    assert (report.lost, report.unexplained) == (0, 1)


def test_a_retry_answer_that_proves_an_earlier_attempt_counts_as_acknowledged() -> None:
    proofs = [
        ("create", kerr.TopicAlreadyExistsError.error_code),
        ("delete", kerr.UnknownTopicOrPartitionError.error_code),
        ("create_partitions", kerr.InvalidPartitionsError.error_code),
    ]
    for kind, code in proofs:
        assert classify(kind, code, maybe_applied_before=True) == ACKED
        assert not is_stale_answer(kind, code, maybe_applied_before=True)
        # the same answer to a first attempt proves nothing: a stale controller's refusal
        assert classify(kind, code, maybe_applied_before=False) == REJECTED
        assert is_stale_answer(kind, code, maybe_applied_before=False)
    assert classify("alter_config", 0, False) == ACKED
    for retry in (kerr.RequestTimedOutError, kerr.NotControllerError, kerr.UnknownServerError):
        assert classify("create", retry.error_code, False) is None
    refused = kerr.InvalidReplicationFactorError.error_code
    assert classify("create", refused, maybe_applied_before=False) == REJECTED
    assert classify("create", refused, maybe_applied_before=True) == IN_DOUBT
    assert not is_stale_answer("create", refused, False)


# ------------------------------------------------------------------------------ the metadata log


def entries(*records: object, start: int = 0) -> list[LogEntry]:
    return [LogEntry(start + i, 1, 1_000 + i, r) for i, r in enumerate(records)]


def part(topic_id: str, pid: int) -> PartitionRecord:
    return PartitionRecord(partition_id=pid, topic_id=topic_id, replicas=(101,), isr=(101,), leader=101)


def test_two_topic_records_for_one_live_name_are_a_duplicate() -> None:
    log = entries(
        TopicRecord(name="a", topic_id="id1"), part("id1", 0), TopicRecord(name="a", topic_id="id2"), part("id2", 0)
    )
    report = find_duplicate_records(log)
    assert report.duplicates == 1 and "offset 2" in report.examples[0] and "'a'" in report.examples[0]


def test_recreating_a_deleted_name_is_no_duplicate_but_reusing_an_id_is() -> None:
    log = entries(
        TopicRecord(name="a", topic_id="id1"),
        RemoveTopicRecord(topic_id="id1"),
        TopicRecord(name="a", topic_id="id2"),
        NoOpRecord(),
    )
    assert find_duplicate_records(log).duplicates == 0
    log = entries(
        TopicRecord(name="a", topic_id="id1"), RemoveTopicRecord(topic_id="id1"), TopicRecord(name="b", topic_id="id1")
    )
    assert find_duplicate_records(log).duplicates == 1


def test_a_partition_created_twice_is_a_duplicate_also_after_a_snapshot() -> None:
    log = entries(TopicRecord(name="a", topic_id="id1"), part("id1", 0), part("id1", 1), part("id1", 1))
    assert find_duplicate_records(log).duplicates == 1
    snapshot = [TopicRecord(name="a", topic_id="id1"), part("id1", 0)]
    later = entries(part("id1", 1), TopicRecord(name="a", topic_id="id9"), start=50)
    report = find_duplicate_records(later, snapshot)
    assert report.duplicates == 1 and "offset 51" in report.examples[0]


def test_identical_logs_have_not_diverged_and_the_common_range_is_compared() -> None:
    log = {o: b"e%d" % o for o in range(10)}
    report = diverged_controllers({1: log, 2: dict(log), 3: {o: v for o, v in log.items() if o < 7}})
    assert report.diverged == [] and report.compared == (0, 6)


def test_a_controller_with_other_bytes_inside_the_common_range_has_diverged() -> None:
    log = {o: b"e%d" % o for o in range(10)}
    odd = dict(log)
    odd[4] = b"something else"
    report = diverged_controllers({1: log, 2: odd, 3: dict(log)})
    assert report.diverged == [2] and report.first_offset == 4
    # past the lowest end the longer logs are not compared: no divergence there
    short = {o: v for o, v in log.items() if o < 4}
    longer = dict(log)
    longer[8] = b"x"
    assert diverged_controllers({1: short, 2: longer, 3: dict(log)}).diverged == []


def test_a_gap_inside_the_common_range_is_divergence() -> None:
    log = {o: b"e%d" % o for o in range(6)}
    holed = {o: v for o, v in log.items() if o != 3}
    assert diverged_controllers({1: log, 2: holed, 3: dict(log)}).diverged == [2]


def test_divergence_is_read_from_real_segment_files(tmp_path: Path) -> None:
    def write(node: int, records: list[object]) -> Path:
        d = tmp_path / f"n{node}" / "__cluster_metadata-0"
        writer = MetadataLogWriter(d, segment_bytes=200, fsync=False)  # several segments
        writer.append(entries(*records))
        writer.close()
        return d

    same = [TopicRecord(name=f"t{i}", topic_id=f"id{i}") for i in range(8)]
    other = list(same)
    other[5] = TopicRecord(name="t5", topic_id="another-id")
    logs = {
        1: read_controller_log(1, write(1, same)),
        2: read_controller_log(2, write(2, same)),
        3: read_controller_log(3, write(3, other)),
    }
    assert all(log.error is None and log.last_offset == 7 for log in logs.values())
    assert len(list((tmp_path / "n1" / "__cluster_metadata-0").glob("*.log"))) > 1
    report = diverged_controllers({n: log.raw for n, log in logs.items()})
    assert report.diverged == [3] and report.first_offset == 5
    assert find_duplicate_records(logs[1].entries).duplicates == 0


# ------------------------------------------------------------------------------ node logs


def test_replay_errors_and_critical_lines_are_found_and_nothing_else() -> None:
    lines = [
        json.dumps({"level": "info", "event": "controller_started"}),
        json.dumps({"level": "critical", "event": "metadata_delivery_stopped", "reason": "x"}),
        json.dumps(
            {
                "level": "error",
                "event": "on_committed_failed",
                "exception": "metadata_log.image.MetadataReplayError: topic name 'a' is taken",
            }
        ),
        json.dumps({"level": "critical", "event": "raft_dump_load_failed"}),
        "Traceback (most recent call last): ... MetadataReplayError: boom",
        json.dumps({"level": "warning", "event": "metadata_stream_failed"}),
        "",
        "not json {",
    ]
    found = replay_error_lines(lines)
    assert len(found) == 4 and all("info" not in f and "warning" not in f for f in found)


# ------------------------------------------------------------------------------ the active controller


def quorum(leader: int, fetch: dict[int, int], code: int = 0) -> admin_pb2.DescribeQuorumResponse:
    resp = admin_pb2.DescribeQuorumResponse(
        leader_id=leader,
        voters=[
            admin_pb2.DescribeQuorumResponse.Replica(replica_id=n, last_fetch_timestamp_ms=ts)
            for n, ts in fetch.items()
        ],
    )
    resp.error.code = code
    return resp


def test_an_active_controller_needs_a_fresh_majority() -> None:
    assert has_active_controller(quorum(1, {1: 10_000, 2: 9_900, 3: -1}), 2000) == 1
    assert has_active_controller(quorum(1, {1: 10_000, 2: 7_000, 3: 6_000}), 2000) is None
    assert has_active_controller(quorum(1, {1: 10_000, 2: 9_000, 3: 9_000}, code=41), 2000) is None
    assert has_active_controller(quorum(-1, {1: 10_000}), 2000) is None
    assert has_active_controller(None, 2000) is None


def test_a_restarted_controller_is_back_only_once_its_new_process_caught_up() -> None:
    resp = quorum(1, {1: 10_000, 2: 9_990, 3: 9_000})
    resp.voters[1].last_caught_up_timestamp_ms = 9_990
    resp.voters[2].last_caught_up_timestamp_ms = 9_000
    assert voter_rejoined(resp, 2, since_ms=9_500)
    assert not voter_rejoined(resp, 3, since_ms=9_500)  # fresh enough for quorum_pending, but from before
    assert not voter_rejoined(resp, 4, since_ms=0)
    assert not voter_rejoined(quorum(1, {1: 10_000, 2: 9_990}, code=41), 2, since_ms=0)


def test_no_active_stretches_from_samples() -> None:
    samples = [(0.0, True), (1.0, False), (2.0, False), (4.5, True), (5.0, False), (6.0, True), (7.0, False)]
    assert no_active_stretches(samples, 9.0) == [(1.0, 4.5), (5.0, 6.0), (7.0, 9.0)]
    assert no_active_stretches([(0.0, True), (1.0, True)], 2.0) == []


def test_windows_the_run_held_a_majority_down_are_excused() -> None:
    samples = [(0.0, True), (1.0, False), (12.0, True)]
    # a majority paused from 0.5 to 8.0: only the 4 s after the heal count
    assert no_active_stretches(samples, 13.0, excused=[(0.5, 8.0)]) == [(8.0, 12.0)]
    # a stretch entirely inside the window counts nothing; one around it counts both sides
    assert no_active_stretches(samples, 13.0, excused=[(0.0, 20.0)]) == []
    assert no_active_stretches(samples, 13.0, excused=[(3.0, 4.0)]) == [(1.0, 3.0), (4.0, 12.0)]


# ------------------------------------------------------------------------------ faults and phases


def test_quorum_fault_schedule_is_seeded_and_aimed_at_the_quorum() -> None:
    timeouts = QuorumTimeouts(election_ms=4000, request_ms=2000)
    seq1 = [
        choose_quorum_fault(r, [1, 2, 3], 2, timeouts, QUORUM_FAULT_KINDS)
        for r in [random.Random(5)]
        for _ in range(300)
    ]
    seq2 = [
        choose_quorum_fault(r, [1, 2, 3], 2, timeouts, QUORUM_FAULT_KINDS)
        for r in [random.Random(5)]
        for _ in range(300)
    ]
    assert seq1 == seq2 and {f.kind for f in seq1} == set(QUORUM_FAULT_KINDS)
    for f in seq1:
        if f.kind == "pause_standbys":
            assert sorted(f.nodes) == [1, 3]
            assert 2.0 < f.hold_s < 4.0  # past the propose timeout, short of the election timeout
        elif f.kind == "kill_majority":
            assert len(f.nodes) == 2 and f.nodes[0] == 2 and f.nodes[1] in (1, 3)
        else:
            assert f.nodes == (2,)
        if f.kind in ("pause_active_controller", "partition_active_controller"):
            assert f.hold_s > timeouts.failover_s  # long enough that the others elect a new leader
    short = QuorumTimeouts(election_ms=1000, request_ms=2000)
    holds = [
        choose_quorum_fault(random.Random(i), [1, 2, 3], None, short, ["pause_standbys"]).hold_s for i in range(50)
    ]
    assert all(h > 2.0 for h in holds)
    with pytest.raises(ValueError, match="unknown quorum fault kind"):
        choose_quorum_fault(random.Random(1), [1, 2, 3], 1, short, ["unplug_the_moon"])


def test_config_values_are_set_removed_and_restored(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    original = '"node.id" = 1\n"controller.quorum.election.timeout.ms" = 1000\n"log.dirs" = "/d"\n[extra]\n"x" = 1\n'
    path.write_text(original, encoding="utf-8")
    keys = ["controller.quorum.election.timeout.ms", "controller.quorum.request.timeout.ms"]
    before = read_config_values(path, keys)
    assert before == {keys[0]: 1000, keys[1]: None}
    write_config_values(path, {keys[0]: 4000, keys[1]: 2000})
    conf = tomllib.loads(path.read_text(encoding="utf-8"))
    assert conf[keys[0]] == 4000 and conf[keys[1]] == 2000 and conf["node.id"] == 1 and conf["extra"] == {"x": 1}
    write_config_values(path, before)
    assert read_config_values(path, keys) == before
    assert tomllib.loads(path.read_text(encoding="utf-8"))["log.dirs"] == "/d"
