"""The Raft identity a controller starts with (issue 26): in a dynamic quorum the voters' keys also
come from the committed voter set kept in ``raft/voters.msgpack``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlog.common import RAFT_DIR
from kraftlog.common.config import ConfigError, NodeConfig
from kraftlog.quorum._quorum_identity import raft_identity
from kraftlog.quorum.raft import RaftVoter, generate_identity_key, public_key_text, write_voters_file


def _config(tmp_path: Path, own_entry: str) -> NodeConfig:
    return NodeConfig(
        {
            "node.id": 2,
            "process.roles": "controller",
            "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9095",
            "log.dirs": str(tmp_path / "data"),
            "metadata.log.dir": str(tmp_path),
            "controller.quorum.raft.voter.keys": own_entry,
            "controller.quorum.raft.identity.key.file": str(tmp_path / "n2.key"),
        }
    )


def test_an_added_voter_takes_the_others_keys_from_its_voter_file(tmp_path: Path) -> None:
    own = generate_identity_key(tmp_path / "n2.key")
    other = generate_identity_key(tmp_path / "n1.key")
    cfg = _config(tmp_path, f"2@{own}")
    with pytest.raises(ConfigError, match=r"lacks the public key of voter\(s\) \[1\]"):
        raft_identity(cfg, node_id=2, voter_ids={1, 2}, dynamic=True)  # no voter file yet
    (tmp_path / RAFT_DIR).mkdir()
    write_voters_file(
        tmp_path / RAFT_DIR,
        {
            1: RaftVoter(1, "127.0.0.1", 9094, "AAAAAAAAAAAAAAAAAAAAAQ", other),
            2: RaftVoter(2, "127.0.0.1", 9096, None, own),
        },
    )
    identity = raft_identity(cfg, node_id=2, voter_ids={1, 2}, dynamic=True)
    assert identity is not None and identity.node_id == 2
    assert {vid: public_key_text(k) for vid, k in identity.voter_keys.items()} == {1: other, 2: own}
    # only the voters it starts with: a key the file holds for a non-voter is not used
    alone = raft_identity(cfg, node_id=2, voter_ids={2}, dynamic=True)
    assert alone is not None and set(alone.voter_keys) == {2}
    with pytest.raises(ConfigError):  # a static quorum reads no voter file
        raft_identity(cfg, node_id=2, voter_ids={1, 2}, dynamic=False)
