"""``perf produce`` turns transactions on as kafka-producer-perf-test does (issue 25)."""

from __future__ import annotations

import argparse

import pytest

from kraftlog.cli._perf import _transactions


def _args(transactional_id: str | None = None, duration_ms: int | None = None) -> argparse.Namespace:
    return argparse.Namespace(transactional_id=transactional_id, transaction_duration_ms=duration_ms)


def test_no_option_and_no_property_sends_no_transactions() -> None:
    config: dict[str, object] = {}
    assert _transactions(_args(), config) is None
    assert "transactional_id" not in config


@pytest.mark.parametrize(
    ("args", "config", "expected_id", "expected_ms"),
    [
        (_args("tx"), {}, "tx", 3000),  # Kafka's default duration
        (_args("tx", 250), {"transactional_id": "from-props"}, "tx", 250),  # the option wins
        (_args(), {"transactional_id": "from-props"}, "from-props", 3000),
    ],
)
def test_transactions_on_with_kafkas_precedence(
    args: argparse.Namespace, config: dict[str, object], expected_id: str, expected_ms: int
) -> None:
    assert _transactions(args, config) == expected_ms
    assert config["transactional_id"] == expected_id


def test_a_duration_alone_uses_a_fresh_performance_producer_id() -> None:
    first: dict[str, object] = {}
    second: dict[str, object] = {}
    assert _transactions(_args(duration_ms=100), first) == 100
    _transactions(_args(duration_ms=100), second)
    assert str(first["transactional_id"]).startswith("performance-producer-")
    assert first["transactional_id"] != second["transactional_id"]
