"""The controller quorum's node keys: Kafka's ``controller.quorum.*`` (a static or a dynamic
quorum, elections, timeouts) and kraftlog's own Raft transport keys (fsync, the Raft port, how
controllers authenticate each other). Part of the node schema, `kraftlog.common.config._config_schema`.
"""

from __future__ import annotations

from kraftlog.common._config_def import ConfigDef, Custom, OneOf, Range
from kraftlog.common.config._config_parse import _check_host_ports, _voters
from kraftlog.common.config._config_schema_topic import _B, _I, _LS, _P, _S

__all__ = ["define_quorum_keys"]


def define_quorum_keys(defs: ConfigDef) -> None:
    """Add the controller quorum's keys, Kafka's and kraftlog's, to the node schema."""
    (
        defs.define(
            "controller.quorum.voters",
            _LS,
            [],
            Custom(_voters, "a comma-separated list of id@host:port"),
            "A static controller quorum (kraft.version 0): every voter's node id and endpoint. Leave it empty "
            "and set controller.quorum.bootstrap.servers for a dynamic quorum (KIP-853).",
        )
        .define(
            "controller.quorum.bootstrap.servers",
            _LS,
            [],
            Custom(_check_host_ports, "a comma-separated list of host:port"),
            "A dynamic quorum (KIP-853, kraft.version 1): the controllers' gRPC endpoints (host:port) through which "
            "brokers and tools find the quorum, used when controller.quorum.voters is empty. A controller of a dynamic "
            "quorum reads its voter set from its metadata log dir, written by 'kraftlog storage format --standalone' "
            "or '--initial-controllers'; controller.quorum.voters, when set, wins (a static quorum, kraft.version 0).",
        )
        .define(
            "controller.quorum.election.timeout.ms",
            _I,
            1000,
            Range(1),
            "Time without a leader before a voter starts an election.",
        )
        .define(
            "controller.quorum.fetch.timeout.ms",
            _I,
            2000,
            Range(1),
            "Time without hearing from the leader before a voter suspects it.",
        )
        .define(
            "controller.quorum.request.timeout.ms", _I, 2000, Range(1), "Timeout of one request between quorum members."
        )
        .define(
            "controller.quorum.election.backoff.max.ms",
            _I,
            1000,
            Range(1),
            "Upper bound of the randomized back-off between elections.",
        )
        .define(
            "controller.quorum.retry.backoff.ms", _I, 20, Range(0), "Back-off before retrying a failed quorum request."
        )
        .define(
            "controller.quorum.append.linger.ms",
            _I,
            25,
            Range(0),
            "How long the leader batches appends before writing them to the log.",
        )
        .define(
            "controller.quorum.fsync",
            _B,
            True,
            None,
            "kraftlog: fsync the Raft journal before acknowledging; turn off only for throwaway test clusters.",
            kraftlog_only=True,
        )
        .define(
            "controller.quorum.raft.port.offset",
            _I,
            1,
            Range(1, 1000),
            "kraftlog: each voter's Raft (pysyncobj) transport listens on its controller.quorum.voters "
            "port plus this offset; the voter port itself serves the controller's gRPC services.",
            kraftlog_only=True,
        )
        .define(
            "controller.quorum.raft.password",
            _P,
            None,
            None,
            "kraftlog: shared secret of controller.quorum.raft.authentication=password (handshake HMAC, "
            "per-connection encryption keys); that mode refuses to start without it. In node-key mode it only seeds "
            "the secrets derived from it elsewhere (sasl.scram.unknown.user.secret, ...).",
            kraftlog_only=True,
        )
        .define(
            "controller.quorum.raft.authentication",
            _S,
            "node-key",
            OneOf("node-key", "password"),
            "kraftlog: how controllers authenticate each other on the Raft port. node-key: each controller as "
            "itself, with its own Ed25519 key (controller.quorum.raft.identity.key.file) checked against "
            "controller.quorum.raft.voter.keys, so one node's secret lets no one pose as another voter. "
            "password: the explicit legacy mode, every controller holds controller.quorum.raft.password and "
            "anyone holding it can pose as any voter. The same on every controller.",
            kraftlog_only=True,
        )
        .define(
            "controller.quorum.raft.identity.key.file",
            _S,
            None,
            None,
            "kraftlog: this controller's Raft identity, an unencrypted PKCS8 PEM Ed25519 private key readable by "
            "its owner only (0600); `kraftlog storage format` writes one when the file is missing. Unset: "
            "raft-identity.key in metadata.log.dir (or the first log dir). node-key mode only.",
            kraftlog_only=True,
        )
        .define(
            "controller.quorum.raft.voter.keys",
            _LS,
            [],
            None,
            "kraftlog: every voter's Raft identity public key as id@<base64 of the raw 32-byte Ed25519 key>, one "
            "per controller.quorum.voters entry (`kraftlog storage format` prints this node's). node-key mode only. "
            "In a dynamic quorum the committed voter set this node kept (raft/voters.msgpack) adds its voters' keys.",
            kraftlog_only=True,
        )
    )
