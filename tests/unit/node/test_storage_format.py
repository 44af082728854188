"""``kraftlog storage format|random-uuid|info`` and the start-time check of formatted dirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftlog import storage
from kraftlog.cli.__main__ import main
from kraftlog.common import config as common_config
from kraftlog.node import NodeStartupError, check_formatted, new_cluster_id


def _config(tmp_path: Path, node_id: int = 1) -> Path:
    path = tmp_path / f"node{node_id}.properties"
    path.write_text(
        f"node.id={node_id}\nprocess.roles=broker,controller\n"
        f"controller.quorum.voters={node_id}@127.0.0.1:19093\n"
        f"log.dirs={tmp_path}/data{node_id}a,{tmp_path}/data{node_id}b\n"
        f"metadata.log.dir={tmp_path}/meta{node_id}\n"
    )
    return path


def test_random_uuid_is_a_kafka_cluster_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "random-uuid"]) == 0
    cid = capsys.readouterr().out.strip()
    assert len(cid) == 22 and cid != new_cluster_id()


def test_random_uuid_speaks_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["storage", "random-uuid", "--output", "json"]) == 0
    cid = json.loads(capsys.readouterr().out)["cluster_id"]
    assert len(cid) == 22 and cid != new_cluster_id()


def test_format_writes_meta_properties_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = _config(tmp_path)
    cid = new_cluster_id()
    assert main(["storage", "format", "-t", cid, "-c", str(cfg_path), "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["formatted"]) == 3
    ids = set()
    for d in ("data1a", "data1b", "meta1"):
        meta = storage.read_meta_properties(tmp_path / d)
        assert meta is not None and meta.cluster_id == cid and meta.node_id == 1
        ids.add(meta.directory_id)
    assert len(ids) == 3  # one directory id per dir

    assert check_formatted(common_config.load_node_config(cfg_path)) == cid


def test_format_refuses_a_formatted_dir_unless_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = _config(tmp_path)
    cid = new_cluster_id()
    assert main(["storage", "format", "-t", cid, "-c", str(cfg_path)]) == 0
    assert main(["storage", "format", "-t", cid, "-c", str(cfg_path)]) == 2
    assert "already formatted" in capsys.readouterr().err
    assert main(["storage", "format", "-t", cid, "-c", str(cfg_path), "--ignore-formatted"]) == 0
    # another cluster id is refused even with --ignore-formatted, and nothing changes
    assert main(["storage", "format", "-t", new_cluster_id(), "-c", str(cfg_path), "-g"]) == 2
    assert storage.read_meta_properties(tmp_path / "data1a").cluster_id == cid


def test_bad_cluster_id_and_bad_config_are_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = _config(tmp_path)
    assert main(["storage", "format", "-t", "not-a-uuid", "-c", str(cfg_path)]) == 2
    assert "invalid cluster id" in capsys.readouterr().err
    assert (
        main(["storage", "format", "-t", new_cluster_id(), "-c", str(cfg_path), "--override", "log.segment.byte=5"])
        == 2
    )
    err = capsys.readouterr().err
    assert "log.segment.byte" in err and "log.segment.bytes" in err


def test_check_formatted_refuses_unformatted_and_foreign_dirs(tmp_path: Path) -> None:

    cfg = common_config.load_node_config(_config(tmp_path))
    with pytest.raises(NodeStartupError, match="not formatted"):
        check_formatted(cfg)
    cid = new_cluster_id()
    for d in ("data1a", "data1b"):
        storage.write_meta_properties(tmp_path / d, storage.MetaProperties(cid, 1))
    storage.write_meta_properties(tmp_path / "meta1", storage.MetaProperties(new_cluster_id(), 1))
    with pytest.raises(NodeStartupError, match="different clusters"):
        check_formatted(cfg)
    storage.write_meta_properties(tmp_path / "meta1", storage.MetaProperties(cid, 7))
    with pytest.raises(NodeStartupError, match="belongs to node 7"):
        check_formatted(cfg)


def test_new_cluster_ids_never_look_like_options() -> None:
    # one id in 64 would start with '-' if drawn naively; 2000 draws make a miss very unlikely
    assert not any(new_cluster_id().startswith("-") for _ in range(2000))


def test_format_finalizes_share_version_1_unless_given_a_feature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27: a new cluster has share groups (Kafka 4.2's default); ``--feature`` sets levels,
    and a level whose dependency is missing is refused (exit 2) before anything is written."""
    from kraftlog.metadata_log import FeatureLevelRecord
    from kraftlog.quorum import read_bootstrap_records

    assert main(["storage", "format", "-t", new_cluster_id(), "-c", str(_config(tmp_path, 1)), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["features"] == {"share.version": 1}
    assert read_bootstrap_records(tmp_path / "meta1") == [FeatureLevelRecord("share.version", 1)]
    off = ["storage", "format", "-t", new_cluster_id(), "-c", str(_config(tmp_path, 2)), "--output", "json"]
    assert main([*off, "--feature", "share.version=0"]) == 0
    assert json.loads(capsys.readouterr().out)["features"] == {"share.version": 0}
    assert read_bootstrap_records(tmp_path / "meta2") == []
    bad = ["storage", "format", "-t", new_cluster_id(), "-c", str(_config(tmp_path, 3))]
    assert main([*bad, "--feature", "metadata.version=25", "--feature", "share.version=1"]) == 2
    assert "share.version level 1 requires metadata.version level 27" in capsys.readouterr().err
    assert not (tmp_path / "meta3").exists() and not (tmp_path / "data3a").exists()
