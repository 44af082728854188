"""`write_private_file` and `private_directory` (issue 24): secrets 0600, cluster directories 0700,
whatever the umask, a leftover or a planted symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kraftlog.common import private_directory, write_private_file


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_private_file_is_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        write_private_file(tmp_path / "secret.password", "hunter2")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "secret.password") == 0o600
    assert (tmp_path / "secret.password").read_text() == "hunter2"
    assert [p.name for p in tmp_path.iterdir()] == ["secret.password"], "no temporary file left"


def test_replacing_a_world_readable_file_makes_it_private(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text("old")
    path.chmod(0o644)
    write_private_file(path, b"new", fsync=False)
    assert _mode(path) == 0o600 and path.read_bytes() == b"new"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "client.properties"
    write_private_file(path, "old")

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_private_file(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["client.properties"]


def test_a_private_directory_and_its_new_parents_are_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = private_directory(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    assert made == tmp_path / "a" / "b"
    assert _mode(tmp_path / "a") == 0o700 and _mode(tmp_path / "a" / "b") == 0o700


def test_an_existing_directory_is_closed_and_its_parent_left_alone(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    (tmp_path / "cluster").mkdir(mode=0o755)
    private_directory(tmp_path / "cluster")
    assert _mode(tmp_path / "cluster") == 0o700
    assert _mode(tmp_path) == 0o755


def test_a_file_in_place_of_the_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(NotADirectoryError):
        private_directory(tmp_path / "x")
