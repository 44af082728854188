"""``kraftlog client-quotas`` and the quota nodes of ``kraftlog metadata tree`` (issue 24)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kraftlog.cli import _client_quotas
from kraftlog.cli.__main__ import main
from kraftlog.metadata_log import ClientQuotaRecord, LogEntry, MetadataLogWriter, UserScramCredentialRecord
from kraftlog.proto import errors_pb2, quotas_pb2
from tests.unit.cli.test_cli_metadata import TS, _tree_lines, _uncached_logging  # noqa: F401  (autouse)


def test_the_tree_draws_quotas_where_zookeeper_kept_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [
        ClientQuotaRecord(entity=(("user", "alice"),), key="producer_byte_rate", value=1048576),
        UserScramCredentialRecord("alice", 1, b"s", b"k", b"v", 4096),
        ClientQuotaRecord(entity=(("client-id", None), ("user", "alice")), key="request_percentage", value=12.5),
        ClientQuotaRecord(entity=(("user", None),), key="consumer_byte_rate", value=2048),
        ClientQuotaRecord(entity=(("client-id", "app one"),), key="controller_mutation_rate", value=3),
    ]
    with MetadataLogWriter(tmp_path, segment_bytes=1 << 20, fsync=False) as w:
        w.append([LogEntry(i, 1, TS + i, r) for i, r in enumerate(records)])
    assert main(["metadata", "tree", "--log-dir", str(tmp_path)]) == 0
    nodes = _tree_lines(capsys.readouterr().out)
    # a user's quotas and SCRAM mechanisms share its config node, as in ZooKeeper
    assert nodes["/config/users/alice"] == {
        "version": 1,
        "config": {"SCRAM-SHA-256": "iterations=4096", "producer_byte_rate": "1048576"},
    }
    assert nodes["/config/users/alice/clients/<default>"] == {"version": 1, "config": {"request_percentage": "12.5"}}
    assert nodes["/config/users/<default>"] == {"version": 1, "config": {"consumer_byte_rate": "2048"}}
    assert nodes["/config/clients/app%20one"] == {"version": 1, "config": {"controller_mutation_rate": "3"}}


class _Admin:
    """What the command calls of the admin client."""

    def __init__(self) -> None:
        self.altered: list[Any] = []
        self.described: list[Any] = []

    def __enter__(self) -> _Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def close(self) -> None:
        pass

    def alter_client_quotas(self, alterations: list[Any]) -> quotas_pb2.AlterClientQuotasResponse:
        self.altered.extend(alterations)
        ok = errors_pb2.Error(code=0, name="NONE")
        return quotas_pb2.AlterClientQuotasResponse(results=[quotas_pb2.AlterClientQuotasResponse.Result(error=ok)])

    def describe_client_quotas(self, components: list[Any], *, strict: bool = False) -> list[Any]:
        self.described.append((components, strict))
        return [((("client-id", None), ("user", "alice")), {"producer_byte_rate": 1024.0})]


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> _Admin:
    fake = _Admin()
    monkeypatch.setattr(_client_quotas, "make_admin", lambda *a, **k: fake)
    return fake


def test_alter_pairs_entity_types_with_names_in_order(admin: _Admin, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "client-quotas", "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--entity-type", "clients", "--entity-default",
            "--add-config", "producer_byte_rate=1024,request_percentage=12.5",
            "--delete-config", "consumer_byte_rate",
            "--bootstrap-server", "127.0.0.1:1", "--output", "json",
        ]
    )  # fmt: skip
    assert code == 0
    assert admin.altered == [
        (
            {"user": "alice", "client-id": None},
            {"producer_byte_rate": 1024.0, "request_percentage": 12.5, "consumer_byte_rate": None},
        )
    ]
    assert json.loads(capsys.readouterr().out)["altered"] is True


def test_describe_filters_and_prints_json(admin: _Admin, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["client-quotas", "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type"]
    assert main([*args, "clients", "--bootstrap-server", "127.0.0.1:1", "--output", "json"]) == 0
    assert admin.described == [([("user", 0, "alice"), ("client-id", 2, None)], True)]
    assert json.loads(capsys.readouterr().out) == {
        "quotas": [
            {
                "entity": [
                    {"entity_type": "client-id", "entity_name": None},
                    {"entity_type": "user", "entity_name": "alice"},
                ],
                "values": {"producer_byte_rate": 1024.0},
            }
        ]
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--alter", "--entity-type", "ips", "--entity-name", "1.2.3.4", "--add-config", "x=1"],
            "use users or clients",
        ),
        (["--alter", "--entity-name", "alice", "--add-config", "x=1"], "must follow an --entity-type"),
        (["--alter", "--entity-type", "users", "--add-config", "x=1"], "needs --entity-name NAME or --entity-default"),
        (["--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "x=abc"], "must be a number"),
        (["--alter", "--entity-type", "users", "--entity-name", "a"], "give --add-config or --delete-config"),
    ],
)
def test_bad_command_lines_name_the_problem(
    admin: _Admin, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["client-quotas", *argv, "--bootstrap-server", "127.0.0.1:1"]) != 0
    assert message in capsys.readouterr().err
    assert admin.altered == []


def test_snapshot_diff_names_quota_changes() -> None:
    from kraftlog.cli._snapshot import diff_images
    from kraftlog.metadata_log import MetadataImage

    alice = (("user", "alice"),)
    a = MetadataImage.from_records(
        [
            ClientQuotaRecord(entity=alice, key="producer_byte_rate", value=1000),
            ClientQuotaRecord(entity=alice, key="consumer_byte_rate", value=5),
        ]
    )
    b = MetadataImage.from_records(
        [
            ClientQuotaRecord(entity=alice, key="producer_byte_rate", value=2000),
            ClientQuotaRecord(entity=(("client-id", None),), key="request_percentage", value=10),
        ]
    )
    found = [(d.change, d.kind, d.entity, d.fields) for d in diff_images(a, b)]
    assert found == [
        ("added", "client_quota", "client-id=<default> request_percentage", {"value": (None, 10.0)}),
        ("removed", "client_quota", "user=alice consumer_byte_rate", {"value": (5.0, None)}),
        ("changed", "client_quota", "user=alice producer_byte_rate", {"value": (1000.0, 2000.0)}),
    ]
