"""Parsing ``--initial-controllers`` and the voters file of a dynamic quorum (KIP-853, issue 26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlog.quorum import (
    BootstrapVoters,
    DynamicVoter,
    DynamicVoterError,
    check_voter_directory,
    parse_dynamic_voters,
    read_bootstrap_voters,
    write_bootstrap_voters,
)

D1, D2 = "K90IZ-0DRNazJ49kCZ1EMQ", "aUARLskQTCW4qCZDtS_cwA"


def test_parses_kafkas_examples_and_ipv6() -> None:
    voters = parse_dynamic_voters(f"0@localhost:8020:{D1},1@[::1]:8030:{D2}")
    assert voters[0] == DynamicVoter(0, "localhost", 8020, D1)
    assert voters[1].host == "::1" and voters[1].port == 8030
    assert str(voters[1]) == f"1@[::1]:8030:{D2}"
    assert parse_dynamic_voters(str(voters[1])) == {1: voters[1]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "No voters given."),
        (f"0localhost:8020:{D1}", "No @ found"),
        (f"x@localhost:8020:{D1}", "Failed to parse node id"),
        (f"-1@localhost:8020:{D1}", "Invalid negative node id -1"),
        (f"0@:8020:{D1}", "No hostname found"),
        (f"0@[::1:8020:{D1}", "closing bracket"),
        ("0@localhost", "No colon following hostname"),
        ("0@localhost:8020", "No colon following port"),
        (f"0@localhost:http:{D1}", "Failed to parse port"),
        (f"0@localhost:0:{D1}", "Invalid port 0"),
        ("0@localhost:8020:short", "Failed to parse directory ID"),
        ("0@localhost:8020:AAAAAAAAAAAAAAAAAAAAAA", "zero directory ID"),
        (f"0@h:1:{D1},0@h:2:{D2}", "Node id 0 was specified more than once."),
        (f"0@h:1:{D1},1@h:1:{D2}", "share one host:port"),
    ],
)
def test_refuses_what_kafka_refuses(text: str, message: str) -> None:
    with pytest.raises(DynamicVoterError, match=message):
        parse_dynamic_voters(text)


def test_voters_file_round_trips_and_absent_means_static(tmp_path: Path) -> None:
    assert read_bootstrap_voters(tmp_path) is None
    voters = parse_dynamic_voters(f"1@127.0.0.1:9093:{D1},2@[::1]:9094:{D2}")
    write_bootstrap_voters(tmp_path, voters)
    read = read_bootstrap_voters(tmp_path)
    assert read == BootstrapVoters(voters=voters, kraft_version=1)
    assert read.endpoints() == {1: ("127.0.0.1", 9093), 2: ("::1", 9094)}


def test_a_damaged_voters_file_is_named(tmp_path: Path) -> None:
    write_bootstrap_voters(tmp_path, parse_dynamic_voters(f"1@h:1:{D1}"))
    path = tmp_path / "bootstrap.voters.json"
    path.write_text(path.read_text().replace('"kraft.version": 1', '"kraft.version": 7'))
    with pytest.raises(DynamicVoterError, match="unsupported kraft.version 7"):
        read_bootstrap_voters(tmp_path)
    path.write_text("{not json")
    with pytest.raises(DynamicVoterError, match="not a valid voters file"):
        read_bootstrap_voters(tmp_path)


def test_a_voter_is_its_id_and_its_directory() -> None:
    formatted = BootstrapVoters(voters=parse_dynamic_voters(f"1@h:1:{D1}"))
    check_voter_directory(formatted, 1, D1)
    with pytest.raises(DynamicVoterError, match="not that voter's directory"):
        check_voter_directory(formatted, 1, D2)
    with pytest.raises(DynamicVoterError, match="not that voter's directory"):
        check_voter_directory(formatted, 1, None)
    with pytest.raises(DynamicVoterError, match="not in the formatted voter set"):
        check_voter_directory(formatted, 2, D1)
