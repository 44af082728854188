"""``storage format --add-scram`` (KIP-900, issue 25): Kafka's ScramParser syntax and refusals, the
credential a parsed argument becomes, and the bootstrap file the format writes."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kraftlog.cli._common import UserError
from kraftlog.cli._storage_scram import parse_add_scram
from kraftlog.common.security import ScramMechanism
from kraftlog.common.security._scram import scram_credential
from kraftlog.metadata_log import UserScramCredentialRecord
from kraftlog.metadata_log.image._image_security import credential_from_record
from kraftlog.quorum import BOOTSTRAP_FILE, read_bootstrap_records, write_bootstrap_records

_SALT = b"0123456789abcdef"


def _fixed(n: int) -> bytes:
    return _SALT[:n] if n <= len(_SALT) else _SALT * (n // len(_SALT))


def test_password_form_makes_the_credential_of_that_password() -> None:
    [record] = parse_add_scram(['SCRAM-SHA-256=[name=alice,salt="MDEyMzQ1Njc4OWFiY2RlZg==",password=alice-secret]'])
    assert (record.name, record.mechanism, record.iterations, record.salt) == ("alice", 1, 4096, _SALT)
    expected = scram_credential(ScramMechanism.SCRAM_SHA_256, "alice-secret", salt=_SALT, iterations=4096)
    assert credential_from_record(record) == expected


def test_salted_password_form_and_iterations_and_repeats() -> None:
    salted = b"\x01" * 64
    args = [
        f"SCRAM-SHA-512=[name=bob,iterations=8192,salt={base64.b64encode(_SALT).decode()},"
        f"saltedpassword={base64.b64encode(salted).decode()}]",
        "SCRAM-SHA-256=[name=alice,password=x]",
    ]
    first, second = parse_add_scram(args, rng=_fixed)
    assert (first.name, first.mechanism, first.iterations, first.salt) == ("bob", 2, 8192, _SALT)
    assert (second.name, second.mechanism, second.salt) == ("alice", 1, _fixed(32))
    assert isinstance(first, UserScramCredentialRecord)


def test_random_salts_differ() -> None:
    a, b = parse_add_scram(["SCRAM-SHA-256=[name=a,password=p]", "SCRAM-SHA-256=[name=b,password=p]"])
    assert len(a.salt) == 32 and a.salt != b.salt


@pytest.mark.parametrize(
    ("argument", "named"),
    [
        ("SCRAM-SHA-256", "equals sign"),
        ("SCRAM-SHA-1=[name=a,password=b]", "'SCRAM-SHA-1' is not supported"),
        ("SCRAM-SHA-256=name=a,password=b]", "start with ["),
        ("SCRAM-SHA-256=[name=a,password=b", "end with ]"),
        ("SCRAM-SHA-256=[password=b]", "'name'"),
        ("SCRAM-SHA-256=[name=a]", "'password' or 'saltedpassword'"),
        ("SCRAM-SHA-256=[name=a,saltedpassword=YWJj]", "'salt' with 'saltedpassword'"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", ">= 4096"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=20000]", "<= 16384"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=x]", "'x'"),
        ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "colour"),
        ("SCRAM-SHA-256=[name=a,salt=!!,password=b]", "salt"),
        ("SCRAM-SHA-256=[name=a,password]", "'password'"),
    ],
)
def test_bad_arguments_are_refused_naming_the_part(argument: str, named: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_add_scram(["SCRAM-SHA-256=[name=ok,password=p]", argument])
    assert named in str(caught.value)


def test_bootstrap_file_round_trips_private(tmp_path: Path) -> None:
    records = parse_add_scram(["SCRAM-SHA-256=[name=alice,password=p]"])
    path = write_bootstrap_records(tmp_path, records)
    assert path == tmp_path / BOOTSTRAP_FILE
    assert path.stat().st_mode & 0o077 == 0
    assert read_bootstrap_records(tmp_path) == records
    assert read_bootstrap_records(tmp_path / "nowhere") == []
