"""Process logging: JSON lines off a TTY with node identity, stdlib records in the same format."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest
import structlog

from kraftlog.node._logging import configure_logging


class _TtyStream(io.StringIO):
    """A StringIO that claims to be a terminal, to exercise the human-readable branch."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back so other tests are unaffected."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)
    structlog.contextvars.clear_contextvars()
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_carry_identity_level_event_and_timestamp() -> None:
    out = io.StringIO()
    configure_logging(node_id=3, role="broker", stream=out)
    structlog.get_logger("kraftlog.test").info("partition.leader_elected", partition="t-0", leader=3)

    (line,) = _lines(out)
    assert line["event"] == "partition.leader_elected"
    assert line["level"] == "info"
    assert line["node_id"] == 3
    assert line["role"] == "broker"
    assert line["partition"] == "t-0"
    assert line["logger"] == "kraftlog.test"
    assert isinstance(line["timestamp"], str) and "T" in line["timestamp"]


def test_stdlib_logging_comes_out_as_the_same_json() -> None:
    out = io.StringIO()
    configure_logging(node_id=1, role="controller", stream=out)
    logging.getLogger("pysyncobj.syncobj").warning("leader changed to %s", "node2", extra={"term": 7})

    (line,) = _lines(out)
    assert line["event"] == "leader changed to node2"
    assert line["level"] == "warning"
    assert line["node_id"] == 1
    assert line["role"] == "controller"
    assert line["logger"] == "pysyncobj.syncobj"
    assert line["term"] == 7
    assert "timestamp" in line


def test_library_threads_still_get_the_identity() -> None:
    out = io.StringIO()
    configure_logging(node_id=2, role="broker", stream=out)
    worker = threading.Thread(target=lambda: logging.getLogger("grpc").error("poller died"))
    worker.start()
    worker.join()

    (line,) = _lines(out)
    assert (line["node_id"], line["role"], line["level"]) == (2, "broker", "error")


def test_exceptions_are_rendered_inside_the_json_line() -> None:
    out = io.StringIO()
    configure_logging(node_id=1, role="broker", stream=out)
    try:
        raise RuntimeError("disk gone")
    except RuntimeError:
        structlog.get_logger().exception("append.failed")

    (line,) = _lines(out)
    assert line["level"] == "error"
    assert "RuntimeError: disk gone" in str(line["exception"])


def test_level_filters_both_structlog_and_stdlib() -> None:
    out = io.StringIO()
    configure_logging(node_id=1, role="broker", level="warning", stream=out)
    structlog.get_logger().info("quiet")
    logging.getLogger("grpc").info("quiet too")
    structlog.get_logger().warning("loud")
    assert [line["event"] for line in _lines(out)] == ["loud"]
    with pytest.raises(ValueError):
        configure_logging(node_id=1, role="broker", level="chatty", stream=out)


def test_calling_again_replaces_instead_of_duplicating() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(node_id=1, role="broker", stream=first)
    log = structlog.get_logger("kraftlog.again")
    log.info("one")
    configure_logging(node_id=9, role="broker,controller", level="debug", stream=second)
    log.debug("two")
    logging.getLogger("pysyncobj").info("three")

    assert [line["event"] for line in _lines(first)] == ["one"]
    lines = _lines(second)
    assert [line["event"] for line in lines] == ["two", "three"]
    assert {line["node_id"] for line in lines} == {9}
    assert {line["role"] for line in lines} == {"broker,controller"}


def test_tty_gets_readable_key_value_lines_and_force_json_overrides() -> None:
    tty = _TtyStream()
    configure_logging(node_id=5, role="controller", stream=tty)
    structlog.get_logger().info("quorum.started", voters=3)
    logging.getLogger("pysyncobj").info("raft up")
    text = tty.getvalue()
    assert "quorum.started" in text and "raft up" in text
    assert "node_id" in text and "5" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])

    forced = _TtyStream()
    configure_logging(node_id=5, role="controller", stream=forced, force_json=True)
    structlog.get_logger().info("as.json")
    assert _lines(forced)[0]["event"] == "as.json"

    plain = io.StringIO()
    configure_logging(node_id=None, role="cli", stream=plain, force_json=False)
    structlog.get_logger().info("plain.text", k="v")
    assert "plain.text" in plain.getvalue()
    assert "k=v" in plain.getvalue()
    assert "\x1b[" not in plain.getvalue()  # no colour codes when the stream is not a terminal
