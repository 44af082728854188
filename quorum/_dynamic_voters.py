"""The voter set a dynamic controller quorum (KIP-853, ``kraft.version`` 1) starts from.

``kraftlog storage format --standalone`` (this controller alone) or ``--initial-controllers
id@host:port:directory-id,...`` writes the initial voters into the metadata log dir's
``bootstrap.voters.json`` (Kafka keeps them as a ``VotersRecord`` in the bootstrap checkpoint). A
node whose config has no ``controller.quorum.voters`` (it names ``controller.quorum.bootstrap.servers``
instead) reads its voter set from there at start (`read_bootstrap_voters`).

A voter is ``(id, directory id)``, not just an id: the metadata log dir of voter ``id`` must carry the
directory id the voter set names (`check_voter_directory`), so a controller whose disk was wiped and
re-formatted is a *new* replica and cannot vote with the identity (and the promises) of the old one.

Ordering rule: the file is written (atomically, fsynced) before the dir's ``meta.properties``, so a dir
that says it is formatted holds its voter set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraftlog.common import atomic_write, kafka_uuid, parse_uuid

__all__ = [
    "BOOTSTRAP_VOTERS_FILE",
    "BootstrapVoters",
    "DynamicVoter",
    "DynamicVoterError",
    "check_voter_directory",
    "parse_dynamic_voter",
    "parse_dynamic_voters",
    "read_bootstrap_voters",
    "write_bootstrap_voters",
]

#: in the metadata log dir, beside ``bootstrap.checkpoint``
BOOTSTRAP_VOTERS_FILE = "bootstrap.voters.json"
#: ``kraft.version`` of a quorum whose voter set lives in the log (KIP-853); 0 is the static quorum
KRAFT_VERSION_DYNAMIC = 1
_MAX_PORT = 65535


class DynamicVoterError(ValueError):
    """A malformed ``--initial-controllers`` entry or voters file; the message says what is wrong."""


@dataclass(frozen=True)
class DynamicVoter:
    """One voter of a dynamic quorum: node id, the controller's endpoint, its metadata dir's id."""

    node_id: int
    host: str
    port: int
    #: Kafka's 22-character form
    directory_id: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}:{self.directory_id}"


def parse_dynamic_voter(text: str) -> DynamicVoter:
    """Parse ``id@host:port:directory-id`` (an IPv6 host in brackets), as Kafka's DynamicVoter.parse."""
    entry = text.strip()
    node_text, at, rest = entry.partition("@")
    if not at:
        raise DynamicVoterError(f"No @ found in dynamic voter string {entry!r}.")
    try:
        node_id = int(node_text)
    except ValueError:
        raise DynamicVoterError(f"Failed to parse node id in dynamic voter string {entry!r}.") from None
    if node_id < 0:
        raise DynamicVoterError(f"Invalid negative node id {node_id} in dynamic voter string {entry!r}.")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise DynamicVoterError(f"Hostname did not have closing bracket in dynamic voter string {entry!r}.")
        if not rest.startswith(":"):
            raise DynamicVoterError(f"No colon following hostname could be found in dynamic voter string {entry!r}.")
        rest = rest[1:]
    else:
        host, colon, rest = rest.partition(":")
        if not colon:
            raise DynamicVoterError(f"No colon following hostname could be found in dynamic voter string {entry!r}.")
    if not host:
        raise DynamicVoterError(f"No hostname found after node id in dynamic voter string {entry!r}.")
    port_text, colon, directory_text = rest.partition(":")
    if not colon:
        raise DynamicVoterError(f"No colon following port could be found in dynamic voter string {entry!r}.")
    try:
        port = int(port_text)
    except ValueError:
        raise DynamicVoterError(f"Failed to parse port in dynamic voter string {entry!r}.") from None
    if not 0 < port <= _MAX_PORT:
        raise DynamicVoterError(f"Invalid port {port} in dynamic voter string {entry!r}.")
    try:
        if len(directory_text.strip()) != 22:
            raise ValueError(directory_text)
        directory = parse_uuid(directory_text)
    except ValueError:
        raise DynamicVoterError(f"Failed to parse directory ID in dynamic voter string {entry!r}.") from None
    if directory.int == 0:
        raise DynamicVoterError(f"Invalid zero directory ID in dynamic voter string {entry!r}.")
    return DynamicVoter(node_id=node_id, host=host, port=port, directory_id=kafka_uuid(directory))


def parse_dynamic_voters(text: str) -> dict[int, DynamicVoter]:
    """Parse ``--initial-controllers``: comma-separated voters, each node id once (Kafka's rules)."""
    voters: dict[int, DynamicVoter] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        voter = parse_dynamic_voter(item)
        if voter.node_id in voters:
            raise DynamicVoterError(f"Node id {voter.node_id} was specified more than once.")
        voters[voter.node_id] = voter
    if not voters:
        raise DynamicVoterError("No voters given.")
    endpoints = [(v.host, v.port) for v in voters.values()]
    if len(set(endpoints)) != len(endpoints):
        raise DynamicVoterError("Two voters share one host:port.")
    return voters


@dataclass(frozen=True)
class BootstrapVoters:
    """The voter set a dynamic quorum was formatted with, and its ``kraft.version``."""

    voters: Mapping[int, DynamicVoter]
    kraft_version: int = KRAFT_VERSION_DYNAMIC

    def endpoints(self) -> dict[int, tuple[str, int]]:
        """voter id -> (host, port): the shape ``controller.quorum.voters`` parses into."""
        return {vid: (v.host, v.port) for vid, v in sorted(self.voters.items())}


def write_bootstrap_voters(metadata_log_dir: str | Path, voters: Mapping[int, DynamicVoter]) -> Path:
    """Write the initial voter set into the metadata log dir (atomically, fsynced)."""
    path = Path(metadata_log_dir) / BOOTSTRAP_VOTERS_FILE
    body = {
        "kraft.version": KRAFT_VERSION_DYNAMIC,
        "voters": [
            {"id": v.node_id, "host": v.host, "port": v.port, "directory.id": v.directory_id}
            for _vid, v in sorted(voters.items())
        ],
    }
    atomic_write(path, (json.dumps(body, indent=2) + "\n").encode(), mode=0o644)
    return path


def read_bootstrap_voters(metadata_log_dir: str | Path) -> BootstrapVoters | None:
    """The voter set this metadata log dir was formatted with; None when it was formatted for a
    static quorum (no file). A malformed file raises `DynamicVoterError` naming it."""
    path = Path(metadata_log_dir) / BOOTSTRAP_VOTERS_FILE
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text())
        version = int(body["kraft.version"])
        entries: Sequence[Mapping[str, object]] = body["voters"]
        text = ",".join(
            str(DynamicVoter(int(str(e["id"])), str(e["host"]), int(str(e["port"])), str(e["directory.id"])))
            for e in entries
        )
        voters = parse_dynamic_voters(text)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DynamicVoterError(f"{path}: not a valid voters file ({err})") from None
    if version != KRAFT_VERSION_DYNAMIC:
        raise DynamicVoterError(f"{path}: unsupported kraft.version {version}")
    return BootstrapVoters(voters=voters, kraft_version=version)


def check_voter_directory(voters: BootstrapVoters, node_id: int, directory_id: str | None) -> None:
    """Refuse to run voter ``node_id`` from a metadata dir the voter set does not name.

    Raises `DynamicVoterError` when the node is not a voter (joining as an observer is not
    supported) or when its metadata dir's ``directory.id`` differs from its voter entry's.
    """
    voter = voters.voters.get(node_id)
    if voter is None:
        raise DynamicVoterError(
            f"node {node_id} is not in the formatted voter set ({', '.join(map(str, voters.voters.values()))})"
        )
    if directory_id != voter.directory_id:
        raise DynamicVoterError(
            f"voter {node_id} is formatted with directory id {voter.directory_id}, but its metadata log dir "
            f"has {directory_id or 'none'}: this is not that voter's directory"
        )
