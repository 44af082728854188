"""`NodeConfig` (a node's validated, frozen configuration), its loader and topic-config validation.
See `kraftlog.common.config`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, final

from kraftlog.common._config_def import LONG_MAX, ConfigError
from kraftlog.common.config._config_parse import _escape_properties, _split_override, _voters, read_config_file
from kraftlog.common.config._config_schema import (
    DYNAMIC_BROKER_KEYS,
    NODE_CONFIG_DEFS,
    TOPIC_CONFIG_DEFS,
    TOPIC_SYNONYMS,
)
from kraftlog.common.config._config_schema_group_share import check_share_group_keys
from kraftlog.common.config._config_schema_share import check_share_keys
from kraftlog.common.config._config_support import check_supported

# ---------------------------------------------------------------------------------------------
# NodeConfig
# ---------------------------------------------------------------------------------------------


@final
class NodeConfig(Mapping[str, Any]):
    """The validated, immutable configuration of one node.

    ``cfg[key]`` returns the typed value, or Kafka's default when the key was not set (``None`` for
    keys Kafka leaves unset, e.g. ``log.retention.ms``). ``originals`` holds only what was set
    explicitly, which is what a config dump or DescribeConfigs "source" needs.
    """

    __slots__ = ("_values", "_originals", "_voters", "_formatted_voters", "_observer")

    _values: Mapping[str, object]
    _originals: Mapping[str, object]
    _voters: Mapping[int, tuple[str, int]]
    _formatted_voters: Mapping[int, tuple[str, int]] | None
    _observer: bool

    def __init__(
        self,
        settings: Mapping[str, object] | None = None,
        formatted_voters: Mapping[int, tuple[str, int]] | None = None,
        observer: bool = False,
    ) -> None:
        """Parse and validate ``settings`` (raw strings or typed values keyed by Kafka name).

        ``formatted_voters`` is the voter set of a dynamic quorum (KIP-853) as ``kraftlog storage
        format --standalone|--initial-controllers`` wrote it into the metadata log dir: a node
        without ``controller.quorum.voters`` runs with it (see `with_formatted_voters`).
        """
        parsed = NODE_CONFIG_DEFS.parse(settings or {})
        values = NODE_CONFIG_DEFS.defaults()
        values.update(parsed)
        voters = _check_node(values, formatted_voters, observer=observer)
        check_supported(values, parsed)
        object.__setattr__(self, "_values", MappingProxyType(values))
        object.__setattr__(self, "_originals", MappingProxyType(parsed))
        object.__setattr__(self, "_voters", MappingProxyType(voters))
        kept = None if formatted_voters is None else MappingProxyType(dict(formatted_voters))
        object.__setattr__(self, "_formatted_voters", kept)
        object.__setattr__(self, "_observer", observer)

    @classmethod
    def from_mapping(cls, settings: Mapping[str, object]) -> NodeConfig:
        """Build a config from a mapping, e.g. in tests or the local-cluster launcher."""
        return cls(settings)

    def __reduce__(
        self,
    ) -> tuple[type[NodeConfig], tuple[dict[str, object], dict[int, tuple[str, int]] | None, bool]]:
        """Pickle as the explicit settings (re-validated on load), e.g. for worker processes."""
        formatted = None if self._formatted_voters is None else dict(self._formatted_voters)
        return (NodeConfig, (dict(self._originals), formatted, self._observer))

    def with_formatted_voters(self, voters: Mapping[int, tuple[str, int]]) -> NodeConfig:
        """This config running the dynamic quorum formatted with ``voters`` (id -> controller host,
        port); ConfigError when the config has a static ``controller.quorum.voters``."""
        return NodeConfig(dict(self._originals), voters)

    def with_discovered_voters(self, voters: Mapping[int, tuple[str, int]]) -> NodeConfig:
        """This controller running as an observer (issue 26, KIP-853) of the voter set the bootstrap
        servers reported: like `with_formatted_voters`, but this node need not be a voter."""
        return NodeConfig(dict(self._originals), voters, observer=True)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("NodeConfig is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("NodeConfig is immutable")

    def __getitem__(self, key: str) -> Any:
        # Any, not object: the schema checked each value's type at load, and the key says which
        # (``cfg["broker.session.timeout.ms"]`` is an int); callers use it as that type.
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(str(NODE_CONFIG_DEFS.unknown_key_error(key))) from None

    def __contains__(self, key: object) -> bool:
        # Mapping's default calls __getitem__ and catches its KeyError, whose "did you mean" message
        # costs a difflib search over every known key (~20 ms); TLS setup asks, for each ssl.* key
        # of each listener, whether its listener.name.<l>. form is set: a look-up answers that.
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key!r}: {value!r}" for key, value in self._originals.items())
        return f"NodeConfig({{{shown}}})"

    @property
    def originals(self) -> Mapping[str, object]:
        """The explicitly set keys and their typed values (read-only)."""
        return self._originals

    @property
    def node_id(self) -> int:
        """``node.id``."""
        value = self._values["node.id"]
        assert isinstance(value, int)
        return value

    @property
    def roles(self) -> tuple[str, ...]:
        """``process.roles`` in the order given."""
        value = self._values["process.roles"]
        assert isinstance(value, list)
        return tuple(value)

    @property
    def is_broker(self) -> bool:
        """True if this node runs the broker role."""
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        """True if this node runs the controller role (is a Raft voter)."""
        return "controller" in self.roles

    @property
    def log_dirs(self) -> list[str]:
        """Partition log directories: ``log.dirs`` if set, else ``log.dir`` (Kafka's precedence)."""
        dirs = self._values["log.dirs"]
        if dirs is None:
            dirs = self._values["log.dir"]
        assert isinstance(dirs, list)
        return list(dirs)

    @property
    def metadata_log_dir(self) -> str:
        """``metadata.log.dir``, or the first log directory as in Kafka."""
        value = self._values["metadata.log.dir"]
        return value if isinstance(value, str) and value else self.log_dirs[0]

    @property
    def quorum_voters(self) -> Mapping[int, tuple[str, int]]:
        """The voters as id -> (host, port): ``controller.quorum.voters`` (static quorum), or the
        formatted voter set of a dynamic one (`with_formatted_voters`); empty on a dynamic-quorum
        node before its formatted voters are known (a broker, or a config loaded to format)."""
        return self._voters

    @property
    def controller_endpoint(self) -> tuple[str, int] | None:
        """This controller's own ``host:port``. A static quorum: its voter entry, else its
        ``CONTROLLER`` listener. A dynamic quorum (KIP-853): its ``CONTROLLER`` listener (the voter
        set may still name an endpoint it left: it reports the new one, UpdateRaftVoter), a wildcard
        listener host taking its voter entry's host. None if neither is known."""
        own = self._voters.get(self.node_id)
        if own is not None and self.kraft_version < 1:
            return own
        from kraftlog.common.config._config_addresses import parse_listeners

        listeners = self._values["listeners"]
        endpoint = parse_listeners(listeners if isinstance(listeners, (str, list)) else []).get("CONTROLLER")
        if endpoint is None:
            return own
        if not endpoint[0] or endpoint[0] in _WILDCARD_HOSTS:
            return (own[0], endpoint[1]) if own is not None else None
        return endpoint

    @property
    def kraft_version(self) -> int:
        """0 for a static quorum (``controller.quorum.voters``), 1 for a dynamic one (KIP-853)."""
        return 0 if self._values["controller.quorum.voters"] else 1

    @property
    def controller_endpoints(self) -> list[str]:
        """Where this node reaches the controllers' gRPC listener: the voters' ``host:port``, or
        ``controller.quorum.bootstrap.servers`` when the voter set is not in the config."""
        if self._voters:
            return [f"{h}:{p}" for _vid, (h, p) in sorted(self._voters.items())]
        servers = self._values["controller.quorum.bootstrap.servers"]
        assert isinstance(servers, list)
        return [str(s) for s in servers]

    def topic_defaults(self, *dynamic_layers: Mapping[str, str]) -> dict[str, object]:
        """Topic-level defaults derived from this node's broker-level keys, with Kafka's precedence.

        ``dynamic_layers`` are dynamic broker configs as the metadata image holds them (the
        cluster-wide default, then this broker's own): each overrides, key by key, this node's
        static values and the layers before it, as Kafka's DynamicBrokerConfig does; keys that
        are not dynamic, and values that do not parse (the controller checked them), are ignored.
        For each topic key the first broker synonym with a value wins (``log.retention.ms``, then
        ``log.retention.minutes``, then ``log.retention.hours``), scaled to milliseconds; a negative
        retention means unlimited and is reported as -1, as Kafka does.
        """
        values = dict(self._values)
        for layer in dynamic_layers:
            for key, raw in layer.items():
                if key in DYNAMIC_BROKER_KEYS:
                    try:
                        values[key] = NODE_CONFIG_DEFS.parse_value(key, raw)
                    except ConfigError:
                        continue
        result: dict[str, object] = {}
        for topic_key, spec in TOPIC_CONFIG_DEFS.items():
            value: object = spec.default
            for broker_key in TOPIC_SYNONYMS[topic_key]:
                candidate = values[broker_key]
                if candidate is None:
                    continue
                unit = NODE_CONFIG_DEFS[broker_key].topic_unit_ms
                if unit != 1 and isinstance(candidate, int):
                    candidate = min(candidate * unit, LONG_MAX)
                value = candidate
                break
            if topic_key == "retention.ms" and isinstance(value, int) and value < 0:
                value = -1
            result[topic_key] = list(value) if isinstance(value, list) else value
        return result

    def to_properties(self, *, include_defaults: bool = False, mask_passwords: bool = True) -> str:
        """Render as a Java ``.properties`` text that :func:`load_node_config` reads back.

        Only explicitly set keys by default, so the output stays a readable node file; unset
        (``None``) values cannot be expressed and are skipped. Passwords are masked unless asked
        otherwise, because this text ends up in logs and support bundles.
        """
        lines: list[str] = []
        prefixed = [name for name in self._originals if name not in NODE_CONFIG_DEFS]
        for name in [*NODE_CONFIG_DEFS, *prefixed]:
            key = NODE_CONFIG_DEFS.key_for(name)
            assert key is not None  # every original was parsed with a definition
            if not include_defaults and name not in self._originals:
                continue
            value = self._values.get(name)
            if value is None:
                continue
            text = key.format(value, mask_passwords=mask_passwords)
            lines.append(f"{_escape_properties(name, is_key=True)}={_escape_properties(text, is_key=False)}")
        return "".join(line + "\n" for line in lines)


#: a listener bound to every interface names no endpoint another node can dial
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]"})


def _check_node(
    values: Mapping[str, object],
    formatted_voters: Mapping[int, tuple[str, int]] | None = None,
    *,
    observer: bool = False,
) -> dict[int, tuple[str, int]]:
    """Cross-key checks Kafka makes at start-up; returns the voters (static, or formatted)."""
    node_id = values.get("node.id")
    if node_id is None:
        raise ConfigError("missing required config 'node.id' (a non-negative integer)", key="node.id")
    assert isinstance(node_id, int)

    roles = values["process.roles"]
    assert isinstance(roles, list)
    if not roles:
        raise ConfigError(
            "'process.roles' must be a non-empty subset of [broker, controller]", key="process.roles", value=roles
        )
    if len(set(roles)) != len(roles):
        raise ConfigError(f"'process.roles' lists a role twice: {roles}", key="process.roles", value=roles)

    voter_items = values["controller.quorum.voters"]
    assert isinstance(voter_items, list)
    voters = _voters(voter_items)  # already validated by the key's validator
    bootstrap = values["controller.quorum.bootstrap.servers"]
    if not voters and not bootstrap:
        raise ConfigError(
            "set 'controller.quorum.voters' (a static quorum: id@host:port,...) or "
            "'controller.quorum.bootstrap.servers' (a dynamic quorum, KIP-853: host:port,...)",
            key="controller.quorum.voters",
            value=voter_items,
        )
    if formatted_voters is not None:
        if voters:
            raise ConfigError(
                "'controller.quorum.voters' is set (a static quorum) but the metadata log dir is formatted "
                "for a dynamic quorum: remove controller.quorum.voters and set controller.quorum.bootstrap.servers",
                key="controller.quorum.voters",
                value=voter_items,
            )
        voters = dict(formatted_voters)
    # without voters: a dynamic quorum whose voter set is on disk, read at start (or a broker's)
    ids = ", ".join(str(voter) for voter in voters)
    # an observer (issue 26, KIP-853) is a dynamic quorum's controller outside the voter set it discovered
    if voters and "controller" in roles and node_id not in voters and not observer:
        raise ConfigError(
            f"node.id {node_id} has the controller role but is not in 'controller.quorum.voters' ({ids})",
            key="controller.quorum.voters",
            value=voter_items,
        )
    if voters and "controller" not in roles and node_id in voters:
        raise ConfigError(
            f"node.id {node_id} is in 'controller.quorum.voters' ({ids}) but process.roles lacks 'controller'",
            key="process.roles",
            value=roles,
        )

    dirs = values["log.dirs"] if values["log.dirs"] is not None else values["log.dir"]
    if not dirs:
        raise ConfigError("'log.dirs' (or 'log.dir') must name at least one directory", key="log.dirs", value=dirs)

    if values["metrics.listener.authentication"] == "token" and not values["metrics.listener.token.file"]:
        raise ConfigError(
            "'metrics.listener.authentication' is token: set 'metrics.listener.token.file' to the file holding it",
            key="metrics.listener.token.file",
        )
    check_share_group_keys(values)
    check_share_keys(values)
    wait_ms, lag_ms = values["replica.fetch.wait.max.ms"], values["replica.lag.time.max.ms"]
    assert isinstance(wait_ms, int) and isinstance(lag_ms, int)
    if wait_ms > lag_ms:
        raise ConfigError(
            f"'replica.fetch.wait.max.ms' ({wait_ms}) must not exceed 'replica.lag.time.max.ms' ({lag_ms}),"
            " or healthy followers would drop out of the ISR",
            key="replica.fetch.wait.max.ms",
            value=wait_ms,
        )
    return voters


# ---------------------------------------------------------------------------------------------
# Topic configs
# ---------------------------------------------------------------------------------------------


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, object]:
    """Validate topic-level configs of CreateTopics / IncrementalAlterConfigs; return typed values.

    Only the given keys are returned (defaults come from :meth:`NodeConfig.topic_defaults`). An
    unknown key or a bad value raises :class:`ConfigError` naming the key; ``None`` values (a DELETE
    operation) must be filtered out by the caller because they are not values.
    """
    parsed = TOPIC_CONFIG_DEFS.parse(configs)
    min_lag, max_lag = parsed.get("min.compaction.lag.ms"), parsed.get("max.compaction.lag.ms")
    if isinstance(min_lag, int) and isinstance(max_lag, int) and min_lag > max_lag:
        raise ConfigError(
            f"'min.compaction.lag.ms' ({min_lag}) must not exceed 'max.compaction.lag.ms' ({max_lag})",
            key="min.compaction.lag.ms",
            value=configs["min.compaction.lag.ms"],
        )
    return parsed


def load_node_config(path: str | os.PathLike[str] | None, overrides: Sequence[str] = ()) -> NodeConfig:
    """Load, validate and freeze a node's configuration.

    ``path`` is a TOML or ``.properties`` file (or None for defaults plus overrides); ``overrides``
    are ``key=value`` strings from ``--override`` and win over the file. Raises :class:`ConfigError`
    on an unknown key (with the closest known one), a bad value (with the expected type or range),
    or contradicting keys (a controller missing from the voters, no roles, no node.id).
    """
    if isinstance(overrides, str):
        raise TypeError("overrides must be a sequence of 'key=value' strings, not one string")
    raw: dict[str, object] = {}
    if path is not None:
        raw.update(read_config_file(path))
    for item in overrides:
        key, value = _split_override(item)
        raw[key] = value
    return NodeConfig(raw)
