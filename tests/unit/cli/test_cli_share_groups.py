"""``kraftlog share-groups`` (issue 27): kafka-share-groups' list and describe views (offsets,
members, state) as tables and as JSON, with the share-group admin client replaced."""

from __future__ import annotations

import json

import pytest

from kraftlog.cli import _share_groups
from kraftlog.cli.__main__ import main
from kraftlog.client import TopicPartition
from kraftlog.client.admin import ShareGroupDescription, ShareMemberDescription
from kraftlog.client.admin._group_admin import GroupListing
from kraftlog.common import errors as kerr

BOOT = ["--bootstrap-server", "127.0.0.1:1"]


class FakeAdmin:
    def __init__(self) -> None:
        self.closed = False

    def list_share_groups(self) -> list[GroupListing]:
        return [GroupListing("q", "", "Stable", 1, "share")]

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        if group_id != "q":
            raise kerr.GroupIdNotFoundError(f"Group {group_id} not found.")
        member = ShareMemberDescription("m1", "c1", "/10.0.0.1", 3, (TopicPartition("t", 0), TopicPartition("t", 1)))
        return ShareGroupDescription("q", "Stable", 1, 3, 3, "simple", (member,))

    def share_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        return {TopicPartition("t", 0): 7, TopicPartition("t", 1): -1}

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(_share_groups, "make_share_group_admin", lambda servers, **kw: fake)
    return fake


def test_list_and_describe_as_json(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["share-groups", "--list", *BOOT, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"groups": [{"group": "q", "state": "Stable"}]}
    assert main(["share-groups", "--describe", "--group", "q", *BOOT, "--output", "json"]) == 0
    offsets = json.loads(capsys.readouterr().out)["offsets"]
    assert [(o["topic"], o["partition"], o["start_offset"]) for o in offsets] == [("t", 0, 7), ("t", 1, -1)]
    assert main(["share-groups", "--describe", "--group", "q", "--members", *BOOT, "--output", "json"]) == 0
    (member,) = json.loads(capsys.readouterr().out)["members"]
    assert member["consumer_id"] == "m1" and member["assignment"] == ["t:0", "t:1"]
    assert main(["share-groups", "--describe", "--group", "q", "--state", *BOOT, "--output", "json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert (state["state"], state["group_epoch"], state["members"]) == ("Stable", 3, 1)


def test_tables_and_errors(admin: FakeAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["share-groups", "--describe", "--group", "q", *BOOT]) == 0
    out = capsys.readouterr().out
    assert "START-OFFSET" in out.splitlines()[0] and out.splitlines()[1].split() == ["q", "t", "0", "7"]
    assert main(["share-groups", "--describe", "--group", "nope", *BOOT]) == 1
    assert "GROUP_ID_NOT_FOUND" in capsys.readouterr().err
    assert main(["share-groups", *BOOT]) == 2  # no action
    assert main(["share-groups", "--describe", *BOOT]) == 2  # --describe needs --group


class FakeConsumer:
    """Logs of t: partition 0 holds offsets 2..10, partition 1 offsets 0..4."""

    def __enter__(self) -> FakeConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def partitions_for_topic(self, name: str) -> set[int]:
        return {0, 1}

    def beginning_offsets(self, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: {0: 2, 1: 0}[tp[1]] for tp in parts}

    def end_offsets(self, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: {0: 10, 1: 4}[tp[1]] for tp in parts}

    def offsets_for_times(self, when: dict[tuple[str, int], int]) -> dict[tuple[str, int], object]:
        from types import SimpleNamespace

        return {tp: (SimpleNamespace(offset=5) if tp[1] == 0 else None) for tp in when}


class ResettingAdmin(FakeAdmin):
    def __init__(self) -> None:
        super().__init__()
        self.altered: list[tuple[str, dict[TopicPartition, int]]] = []
        self.deleted: list[tuple[str, list[str]]] = []
        self.dropped: list[str] = []

    def alter_share_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        if group_id == "busy":
            raise kerr.NonEmptyGroupError("The group busy has active members.")
        self.altered.append((group_id, dict(offsets)))

    def delete_share_group_offsets(self, group_id: str, topics: list[str]) -> None:
        self.deleted.append((group_id, list(topics)))

    def delete_share_group(self, group_id: str) -> None:
        self.dropped.append(group_id)


@pytest.fixture
def resetting(monkeypatch: pytest.MonkeyPatch) -> ResettingAdmin:
    fake = ResettingAdmin()
    monkeypatch.setattr(_share_groups, "make_share_group_admin", lambda servers, **kw: fake)
    monkeypatch.setattr(_share_groups, "make_consumer", lambda servers, **kw: FakeConsumer())
    return fake


def test_reset_offsets_plans_clamps_and_executes(resetting: ResettingAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["share-groups", "--reset-offsets", "--group", "q", *BOOT, "--output", "json"]
    assert main([*base, "--topic", "t", "--to-offset", "3"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["executed"] is False and not resetting.altered
    assert [(o["partition"], o["new_offset"]) for o in plan["offsets"]] == [(0, 3), (1, 3)]
    assert main([*base, "--topic", "t:1", "--to-latest", "--execute"]) == 0
    assert resetting.altered == [("q", {TopicPartition("t", 1): 4})]
    assert main([*base, "--all-topics", "--to-earliest", "--execute"]) == 0  # the group's partitions
    assert resetting.altered[-1] == ("q", {TopicPartition("t", 0): 2, TopicPartition("t", 1): 0})
    assert main([*base, "--topic", "t", "--to-datetime", "2026-01-01T00:00:00", "--execute"]) == 0
    assert resetting.altered[-1] == ("q", {TopicPartition("t", 0): 5, TopicPartition("t", 1): 4})
    capsys.readouterr()
    busy = ["share-groups", "--reset-offsets", "--group", "busy", *BOOT, "--topic", "t", "--to-earliest"]
    assert main([*busy, "--execute"]) == 1 and "NON_EMPTY_GROUP" in capsys.readouterr().err
    assert main(busy[:-1]) == 2  # no --to-...
    assert main(["share-groups", "--reset-offsets", "--group", "q", *BOOT, "--to-earliest"]) == 2  # no topic


def test_delete_and_delete_offsets(resetting: ResettingAdmin, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["share-groups", "--delete-offsets", "--group", "q", "--topic", "t", *BOOT, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"group": "q", "deleted": [{"topic": "t"}]}
    assert resetting.deleted == [("q", ["t"])]
    assert main(["share-groups", "--delete", "--group", "q", *BOOT]) == 0
    assert "successful" in capsys.readouterr().out and resetting.dropped == ["q"]
    assert main(["share-groups", "--delete-offsets", "--group", "q", *BOOT]) == 2  # needs --topic
