"""Tests of the ``kraftlog`` entry point (`cli.__main__`): parsing, exit codes, the demo, and the
installed console script run as a real subprocess."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import sys
from pathlib import Path

from kraftlog.cli.__main__ import main


def test_help_exits_0(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "dump-log" in out and "demo" in out


def test_version_is_the_installed_distribution(capsys) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"kraftlog {importlib.metadata.version('kraftlog')}\n"


def test_subcommand_help_exits_0(capsys) -> None:
    assert main(["dump-log", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--deep-iteration", "--print-data-log", "--verify-index-only", "--max-bytes", "--output"):
        assert option in out


def test_unknown_command_exits_2_with_one_line(capsys) -> None:
    assert main(["frobnicate"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "unknown command" in captured.err and "frobnicate" in captured.err


def test_missing_command_exits_2(capsys) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_unknown_option_exits_2(capsys) -> None:
    assert main(["dump-log", "--no-such-option", "x.log"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--no-such-option" in err


def test_works_without_the_logging_module(monkeypatch, tmp_path: Path, capsys) -> None:
    # node._logging is optional for the offline tools: a missing module falls back to stderr logs
    monkeypatch.setitem(sys.modules, "kraftlog.node._logging", None)
    assert main(["--log-level", "debug", "demo", "--dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "Dumping " in captured.out
    assert "demo_started" in captured.err and "demo_started" not in captured.out


def test_demo_runs_and_reruns_cleanly(tmp_path: Path, capsys) -> None:
    for _ in range(2):  # a second run starts from scratch instead of appending to the first
        assert main(["demo", "--dir", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "Demo partition log" in out
        assert out.count("00000000000000000000.log") >= 2  # summary table and dump
        assert "Dumping " in out and "baseOffset: 0 " in out
        assert "endTxnMarker: COMMIT" in out
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            assert f"compresscodec: {codec}" in out
    logs = sorted(p.name for p in (tmp_path / "demo-0").glob("*.log"))
    assert len(logs) == 2  # rolled once


def test_demo_json(tmp_path: Path, capsys) -> None:
    assert main(["demo", "--dir", str(tmp_path), "--output", "json"]) == 0
    summary, dump = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert len(summary["segments"]) == 2
    assert summary["log_end_offset"] == summary["appended"][-1]["last_offset"] + 1
    assert dump["type"] == "log" and dump["batches"]


def test_demo_into_a_file_is_a_user_error(tmp_path: Path, capsys) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["demo", "--dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a directory" in err


# ------------------------------------------------------------------------------ help texts

_NOT_FOR_USERS = re.compile(
    r"``|`[^`]+`|\*\*|:(?:func|class|mod|meth):"  # reST markup
    r"|\b(?:cli|deploy|broker|quorum|storage|metadata_log|common|node|client)\._[a-z_]+"  # private modules
    r"|\bkraftlog\.[a-z_]+|DESIGN\.md|seed doc"  # module paths, documents a user does not have
)


def _help_texts(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, str]]:
    texts = [(f"{path} description", parser.description or ""), (f"{path} epilog", parser.epilog or "")]
    for action in parser._actions:
        texts.append((f"{path} {'/'.join(action.option_strings) or action.dest}", action.help or ""))
        if isinstance(action, argparse._SubParsersAction):
            texts += [(f"{path} {c.dest}", c.help or "") for c in action._choices_actions]
            for name, sub in action.choices.items():
                texts += _help_texts(sub, f"{path} {name}")
    return texts


def test_help_texts_are_plain_sentences_for_users() -> None:
    from kraftlog.cli.__main__ import build_parser

    texts = _help_texts(build_parser(), "kraftlog")
    assert len(texts) > 200
    offending = [(where, m.group(0)) for where, text in texts if (m := _NOT_FOR_USERS.search(text))]
    assert offending == []
