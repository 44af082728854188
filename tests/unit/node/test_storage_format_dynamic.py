"""``kraftlog storage format --standalone|--initial-controllers|--no-initial-controllers`` (KIP-853):
Kafka's StorageTool rules, the voters file, the directory id binding, and the start-time resolution
of a dynamic quorum's voter set (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftlog import storage
from kraftlog.cli.__main__ import main
from kraftlog.common import config as common_config
from kraftlog.node import NodeStartupError, new_cluster_id, resolve_quorum
from kraftlog.quorum import BOOTSTRAP_VOTERS_FILE, read_bootstrap_voters


def _config(tmp_path: Path, node_id: int = 1, *, roles: str = "controller", static: bool = False) -> Path:
    path = tmp_path / f"node{node_id}.properties"
    quorum = (
        f"controller.quorum.voters={node_id}@127.0.0.1:19093\n"
        if static
        else "controller.quorum.bootstrap.servers=127.0.0.1:19093\n"
    )
    listeners = f"listeners=CONTROLLER://127.0.0.1:{19090 + node_id}\n" if "controller" in roles else ""
    path.write_text(
        f"node.id={node_id}\nprocess.roles={roles}\n{quorum}{listeners}"
        "controller.quorum.raft.authentication=password\ncontroller.quorum.raft.password=secret\n"
        f"log.dirs={tmp_path}/data{node_id}\nmetadata.log.dir={tmp_path}/meta{node_id}\n"
    )
    return path


def _format(cfg: Path, *extra: str) -> int:
    return main(["storage", "format", "-t", new_cluster_id(), "-c", str(cfg), *extra])


def test_standalone_makes_this_controller_the_only_voter_bound_to_its_dir(tmp_path: Path) -> None:
    cfg_path = _config(tmp_path)
    assert _format(cfg_path, "--standalone") == 0
    formatted = read_bootstrap_voters(tmp_path / "meta1")
    assert formatted is not None and formatted.kraft_version == 1
    assert formatted.endpoints() == {1: ("127.0.0.1", 19091)}
    meta = storage.read_meta_properties(tmp_path / "meta1")
    assert meta is not None and meta.directory_id == formatted.voters[1].directory_id
    data_meta = storage.read_meta_properties(tmp_path / "data1")
    assert data_meta is not None and data_meta.directory_id != meta.directory_id
    assert not (tmp_path / "data1" / BOOTSTRAP_VOTERS_FILE).exists()

    cfg = resolve_quorum(common_config.load_node_config(cfg_path))
    assert cfg.quorum_voters == {1: ("127.0.0.1", 19091)} and cfg.kraft_version == 1


def test_initial_controllers_take_this_nodes_directory_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = [new_cluster_id() for _ in range(3)]
    voters = ",".join(f"{n}@127.0.0.1:{19090 + n}:{ids[n - 1]}" for n in (1, 2, 3))
    cfg_path = _config(tmp_path, 2)
    assert _format(cfg_path, "--initial-controllers", voters) == 0
    assert "Formatting dynamic metadata voter directory" in capsys.readouterr().out
    meta = storage.read_meta_properties(tmp_path / "meta2")
    assert meta is not None and meta.directory_id == ids[1]
    cfg = resolve_quorum(common_config.load_node_config(cfg_path))
    assert sorted(cfg.quorum_voters) == [1, 2, 3]


def test_a_wiped_and_reformatted_dir_is_not_the_old_voter(tmp_path: Path) -> None:
    """KIP-853's point: a voter is (id, directory id); a new disk under an old voter set is refused."""
    cfg_path = _config(tmp_path)
    assert _format(cfg_path, "--standalone") == 0
    old = storage.read_meta_properties(tmp_path / "meta1")
    assert old is not None
    storage.write_meta_properties(
        tmp_path / "meta1", storage.MetaProperties(cluster_id=old.cluster_id, node_id=1, directory_id=new_cluster_id())
    )
    with pytest.raises(NodeStartupError, match="not that voter's directory"):
        resolve_quorum(common_config.load_node_config(cfg_path))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--standalone", "--no-initial-controllers"), "not allowed with argument"),
        (("--standalone", "--initial-controllers", "1@h:1:AAAAAAAAAAAAAAAAAAAAAQ"), "not allowed with argument"),
    ],
)
def test_the_three_options_exclude_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    assert _format(_config(tmp_path), *args) == 2
    assert message in capsys.readouterr().err
    assert storage.read_meta_properties(tmp_path / "meta1") is None


def test_kafkas_storage_tool_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _format(_config(tmp_path, 1)) == 2
    assert "you must specify one of the following: --standalone" in capsys.readouterr().err
    assert _format(_config(tmp_path, 2, static=True), "--standalone") == 2
    assert "You cannot specify controller.quorum.voters and format the node" in capsys.readouterr().err
    assert _format(_config(tmp_path, 3, roles="broker"), "--standalone") == 2
    assert "You can only use --standalone on a controller." in capsys.readouterr().err
    # a broker of a dynamic quorum needs none of them, and may say --no-initial-controllers
    assert _format(_config(tmp_path, 4, roles="broker")) == 0
    assert _format(_config(tmp_path, 5, roles="broker"), "--no-initial-controllers") == 0
    assert resolve_quorum(common_config.load_node_config(_config(tmp_path, 5, roles="broker"))).quorum_voters == {}
    for d in ("meta4", "meta5", "meta1", "meta2", "meta3"):
        assert not (tmp_path / d / BOOTSTRAP_VOTERS_FILE).exists()


def test_a_controller_formatted_without_initial_controllers_joins_as_an_observer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 26: Raft changes its voter set now, so --no-initial-controllers formats a controller that
    starts as an observer (no voter set in its dir; a directory id in meta.properties); an
    --initial-controllers list without this controller is still refused, nothing written."""
    other = tmp_path / "observer"
    other.mkdir()
    assert _format(_config(other, 1), "--no-initial-controllers") == 0
    meta = storage.read_meta_properties(other / "meta1")
    assert meta is not None and meta.directory_id
    assert not (other / "meta1" / BOOTSTRAP_VOTERS_FILE).exists()
    observer = resolve_quorum(common_config.load_node_config(_config(other, 1)))
    assert observer.quorum_voters == {} and observer.controller_endpoint == ("127.0.0.1", 19091)
    capsys.readouterr()
    other = f"2@127.0.0.1:19092:{new_cluster_id()}"
    assert _format(_config(tmp_path, 1), "--initial-controllers", other) == 2
    assert "does not list this controller" in capsys.readouterr().err
    assert storage.read_meta_properties(tmp_path / "meta1") is None


def test_bad_initial_controllers_are_user_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = new_cluster_id()
    assert _format(_config(tmp_path), "--initial-controllers", f"1@127.0.0.1:19091:{d},1@127.0.0.1:19092:{d}") == 2
    assert "Node id 1 was specified more than once." in capsys.readouterr().err
    assert _format(_config(tmp_path), "--initial-controllers", "1@127.0.0.1:19091:nope") == 2
    assert "Failed to parse directory ID" in capsys.readouterr().err


def test_a_static_config_on_a_dynamic_dir_fails_to_start_and_one_without_voters_observes(
    tmp_path: Path,
) -> None:
    cfg_path = _config(tmp_path)
    assert _format(cfg_path, "--standalone") == 0
    text = cfg_path.read_text().replace("controller.quorum.bootstrap.servers", "controller.quorum.voters")
    cfg_path.write_text(text.replace("=127.0.0.1:19093", "=1@127.0.0.1:19091"))
    with pytest.raises(NodeStartupError, match="formatted for a dynamic quorum"):
        resolve_quorum(common_config.load_node_config(cfg_path))
    (tmp_path / "meta1" / BOOTSTRAP_VOTERS_FILE).unlink()
    dynamic = _config(tmp_path, 1)
    # a dir without a voter set is an observer's (issue 26): it starts and learns the voters
    assert resolve_quorum(common_config.load_node_config(dynamic)).quorum_voters == {}


def test_static_quorum_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_path = _config(tmp_path, static=True)
    assert main(["storage", "format", "-t", new_cluster_id(), "-c", str(cfg_path), "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kraft_version"] == 0 and out["initial_voters"] is None
    cfg = common_config.load_node_config(cfg_path)
    assert resolve_quorum(cfg) is cfg and cfg.kraft_version == 0


def test_dirs_formatted_without_a_directory_id_keep_working(tmp_path: Path) -> None:
    cfg_path = _config(tmp_path, static=True)
    cid = new_cluster_id()
    for d in ("data1", "meta1"):
        storage.write_meta_properties(tmp_path / d, storage.MetaProperties(cluster_id=cid, node_id=1))
    from kraftlog.node import check_formatted

    cfg = common_config.load_node_config(cfg_path)
    assert check_formatted(cfg) == cid and resolve_quorum(cfg) is cfg
