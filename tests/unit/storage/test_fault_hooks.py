"""The test-only fsync delay (issue 28, ``slow_fsync``): off without the environment variable,
read from the control file while on, refused by ``kraftlog serve`` under systemd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraftlog.cli._common import UserError
from kraftlog.cli._serve import _check_test_faults
from kraftlog.storage import FAULTS_ENV, FSYNC_DELAY_FILE, _fault_hooks


def test_without_the_variable_nothing_is_read_and_nothing_waits() -> None:
    assert _fault_hooks._Delay(None).current_s() == 0.0


def test_the_delay_follows_the_control_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(_fault_hooks.time, "monotonic", lambda: clock[0])
    delay = _fault_hooks._Delay(tmp_path)
    assert delay.current_s() == 0.0  # no file: no delay
    (tmp_path / FSYNC_DELAY_FILE).write_text("250\n", encoding="utf-8")
    assert delay.current_s() == 0.0  # read again only after _REREAD_S
    clock[0] += _fault_hooks._REREAD_S
    assert delay.current_s() == 0.25
    (tmp_path / FSYNC_DELAY_FILE).write_text("not a number", encoding="utf-8")
    clock[0] += _fault_hooks._REREAD_S
    assert delay.current_s() == 0.0
    (tmp_path / FSYNC_DELAY_FILE).write_text("-5", encoding="utf-8")
    clock[0] += _fault_hooks._REREAD_S
    assert delay.current_s() == 0.0


def test_fsync_waits_the_delay_then_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(_fault_hooks.time, "sleep", slept.append)
    control = tmp_path / "faults"
    control.mkdir()
    (control / FSYNC_DELAY_FILE).write_text("40", encoding="utf-8")
    monkeypatch.setattr(_fault_hooks, "_delay", _fault_hooks._Delay(control))
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_WRONLY)
    try:
        _fault_hooks.fsync(fd)
    finally:
        os.close(fd)
    assert slept == [0.04]


def test_serve_refuses_the_hook_under_systemd_and_allows_it_elsewhere() -> None:
    _check_test_faults({})
    _check_test_faults({FAULTS_ENV: "/tmp/x"})  # a test or local cluster: a warning only
    _check_test_faults({"INVOCATION_ID": "abc"})  # systemd without the hook
    with pytest.raises(UserError, match=FAULTS_ENV):
        _check_test_faults({FAULTS_ENV: "/tmp/x", "INVOCATION_ID": "abc"})
