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
