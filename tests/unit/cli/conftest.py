"""The CLI's tests call ``main(argv)`` some 200 times; each call would build the whole parser again
(every command module's subparsers, ~700 arguments: about 90 ms of CPU, most of tests/unit/cli's
time). Here ``main`` gets one parser per test process, built by the real ``build_parser`` on first
use: parsing has no state of its own (a new namespace per call, error output resolved per call), so
every test still sees the parser the command line gets."""

from __future__ import annotations

import functools

import pytest

import kraftlog.cli.__main__ as cli_main

_one_parser = functools.cache(cli_main.build_parser)


@pytest.fixture(autouse=True)
def _parser_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_main, "build_parser", _one_parser)
