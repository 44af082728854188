"""``kraftlog storage format`` gives a controller in node-key mode its Raft identity (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path

from kraftlog.cli.__main__ import main
from kraftlog.quorum.raft import load_private_key, public_key_text

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "node.properties"
    path.write_text(
        "node.id=1\nprocess.roles=controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
        f"log.dirs={tmp_path / 'data'}\nmetadata.log.dir={tmp_path / 'meta'}\n{extra}",
        encoding="utf-8",
    )
    return path


def test_format_writes_the_key_once_and_prints_its_voter_entry(tmp_path: Path, capsys) -> None:
    cfg = _config(tmp_path)
    assert main(["storage", "format", "-t", CLUSTER_ID, "-c", str(cfg), "--output", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)["raft_voter_key"]
    key_file = tmp_path / "meta" / "raft-identity.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert entry == f"1@{public_key_text(load_private_key(key_file, config_key='k'))}"
    before = key_file.read_bytes()
    assert main(["storage", "format", "-t", CLUSTER_ID, "-c", str(cfg), "--ignore-formatted"]) == 0
    assert entry in capsys.readouterr().out
    assert key_file.read_bytes() == before, "a node keeps its identity across formats"


def test_password_mode_writes_no_key(tmp_path: Path, capsys) -> None:
    cfg = _config(tmp_path, "controller.quorum.raft.authentication=password\ncontroller.quorum.raft.password=pw\n")
    assert main(["storage", "format", "-t", CLUSTER_ID, "-c", str(cfg), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["raft_voter_key"] is None
    assert not (tmp_path / "meta" / "raft-identity.key").exists()
