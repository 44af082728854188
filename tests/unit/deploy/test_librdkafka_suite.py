"""The librdkafka suite runner (deploy/scripts/librdkafka_suite.py): which of librdkafka's tests count
as broker tests, how test-runner's summary is read, and how outcomes are counted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[3] / "deploy" / "scripts" / "librdkafka_suite.py"

TABLE = """
struct test tests[] = {
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0001_multiobj, 0),
    _TEST(0028_long_topicnames,
          TEST_F_KNOWN_ISSUE,
          TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0055_producer_latency, TEST_F_KNOWN_ISSUE_WIN32),
    _TEST(0009_mock_cluster,
          TEST_F_LOCAL,
          TEST_BRKVER(0, 11, 0, 0)),
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
    _TEST(0103_transactions,
          0,
          TEST_BRKVER(0, 11, 0, 0),
          .scenario = "default,ak23"),
    _TEST(0170_share_consumer_subscription, 0, TEST_BRKVER(4, 2, 0, 0)),
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}};
"""

SUMMARY = (
    "TEST 20261128 (bare, scenario default) SUMMARY\n"
    "#==================================================================#\n"
    "|\x1b[32m <MAIN>                                   |     PASSED |  90.000s \x1b[0m|\n"
    "|\x1b[32m 0001_multiobj                            |     PASSED |   3.210s \x1b[0m|\n"
    "|\x1b[36m 0009_mock_cluster                        |    SKIPPED |   0.000s \x1b[0m|\n"
    "|\x1b[31m 0103_transactions                        |     FAILED |  12.500s \x1b[0m|"
    "\x1b[31m test.c:123: Expected NO_ERROR\x1b[0m\n"
)


def _suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kraftlog_librdkafka_suite", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_table_marks_local_manual_scenario_and_minimum_version() -> None:
    entries = _suite().parse_test_table(TABLE)
    assert sorted(entries) == [
        "0001_multiobj",
        "0009_mock_cluster",
        "0028_long_topicnames",
        "0045_subscribe_update_topic_remove",
        "0055_producer_latency",
        "0103_transactions",
        "0170_share_consumer_subscription",
        "8000_idle",
    ]
    assert entries["0009_mock_cluster"].local
    assert entries["8000_idle"].manual
    assert entries["0103_transactions"].scenarios == ("default", "ak23")
    assert entries["0170_share_consumer_subscription"].min_version == (4, 2)
    in_default = sorted(n for n, e in entries.items() if e.in_scope("default"))
    assert entries["0028_long_topicnames"].known_issue and not entries["0055_producer_latency"].known_issue
    assert in_default == ["0001_multiobj", "0055_producer_latency", "0103_transactions"]
    assert [n for n, e in entries.items() if e.in_scope("noautocreate")] == ["0045_subscribe_update_topic_remove"]


def test_summary_rows_lose_colours_and_keep_the_failure_reason() -> None:
    rows = _suite().parse_summary(SUMMARY)
    assert "<MAIN>" not in rows
    assert rows["0001_multiobj"] == ("PASSED", "")
    assert rows["0009_mock_cluster"] == ("SKIPPED", "")
    assert rows["0103_transactions"] == ("FAILED", "test.c:123: Expected NO_ERROR")


def test_counts_cover_in_scope_tests_and_a_missing_row_is_a_failure() -> None:
    suite = _suite()
    entries = suite.parse_test_table(TABLE)
    rows = suite.parse_summary(SUMMARY)
    counts = suite.summarize(entries, rows, "default")
    assert counts.passed == ["0001_multiobj"]
    assert counts.failed == [
        ("0055_producer_latency", "no result: test-runner ended before it"),
        ("0103_transactions", "test.c:123: Expected NO_ERROR"),
    ]
    cut_off = suite.summarize(entries, {"0001_multiobj": ("PASSED", "")}, "default")
    assert [name for name, _ in cut_off.failed] == ["0055_producer_latency", "0103_transactions"]
    only = suite.summarize(entries, rows, "default", only=["0001"])
    assert only.passed == ["0001_multiobj"] and not only.failed


def test_report_file_gives_the_states_when_the_summary_is_cut_off() -> None:
    report = (
        '{ "id": "x", "tests": {"<MAIN>": {"name": "<MAIN>", "state": "PASSED", "extra": "", "report": [ ] }, '
        '"0107_topic_recreate": {"name": "0107_topic_recreate", "state": "PASSED", "known_issue": false}, '
        '"0111_delay_create_topics": {"name": "0111_delay_create_topics", "state": "FAILED", "known_issue": false}}}'
    )
    states = _suite().parse_report(report)
    assert states["0107_topic_recreate"] == "PASSED"
    assert states["0111_delay_create_topics"] == "FAILED"
