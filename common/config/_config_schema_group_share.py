"""The node keys of share groups' membership (KIP-932) in the group coordinator, with Kafka 4.2's
names, defaults and validation (GroupCoordinatorConfig): the session timeout and heartbeat
interval given to share-group members and their bounds, the group's maximum size, and the
server-side assignor. Part of the node schema, `kraftlog.common.config._config_schema`;
`check_share_group_keys` makes Kafka's cross-key checks at start.
"""

from __future__ import annotations

from collections.abc import Mapping

from kraftlog.common._config_def import ConfigDef, ConfigError, Custom, Range
from kraftlog.common.config._config_schema_topic import _I, _LS

__all__ = ["check_share_group_keys", "define_share_group_keys"]

_ASSIGNORS = ("simple",)


def _one_assignor(value: object) -> bool:
    if not isinstance(value, list) or len(value) != 1:
        raise ValueError(f"must contain exactly one assignor, but found {len(value) if isinstance(value, list) else 0}")
    if value[0] not in _ASSIGNORS:
        raise ValueError(f"{value[0]!r} is not a share-group assignor (one of [{', '.join(_ASSIGNORS)}])")
    return True


def define_share_group_keys(defs: ConfigDef) -> None:
    """Add the share-group membership keys to the node schema."""
    (
        defs.define(
            "group.share.session.timeout.ms",
            _I,
            45_000,
            Range(1),
            "The timeout to detect client failures when using the share group protocol.",
        )
        .define(
            "group.share.min.session.timeout.ms",
            _I,
            45_000,
            Range(1),
            "The minimum allowed session timeout for share group members.",
        )
        .define(
            "group.share.max.session.timeout.ms",
            _I,
            60_000,
            Range(1),
            "The maximum allowed session timeout for share group members.",
        )
        .define(
            "group.share.heartbeat.interval.ms",
            _I,
            5_000,
            Range(1),
            "The heartbeat interval given to the members of a share group.",
        )
        .define(
            "group.share.min.heartbeat.interval.ms",
            _I,
            5_000,
            Range(1),
            "The minimum heartbeat interval for share group members.",
        )
        .define(
            "group.share.max.heartbeat.interval.ms",
            _I,
            15_000,
            Range(1),
            "The maximum heartbeat interval for share group members.",
        )
        .define(
            "group.share.max.size",
            _I,
            200,
            Range(1, 1000),
            "The maximum number of members that a single share group can accommodate.",
        )
        .define(
            "group.share.assignors",
            _LS,
            list(_ASSIGNORS),
            Custom(_one_assignor, "exactly one assignor, from [simple]"),
            "The server-side assignor of share groups (exactly one; kraftlog has Kafka's built-in simple).",
        )
    )


def _require(ok: bool, message: str, key: str, value: object) -> None:
    if not ok:
        raise ConfigError(message, key=key, value=value)


def check_share_group_keys(values: Mapping[str, object]) -> None:
    """Kafka's start-up checks of the share-group keys against each other (ConfigError naming the key)."""
    v = {k: values[k] for k in values if k.startswith("group.share.")}
    session, heartbeat = v["group.share.session.timeout.ms"], v["group.share.heartbeat.interval.ms"]
    min_s, max_s = v["group.share.min.session.timeout.ms"], v["group.share.max.session.timeout.ms"]
    min_h, max_h = v["group.share.min.heartbeat.interval.ms"], v["group.share.max.heartbeat.interval.ms"]
    assert all(isinstance(x, int) for x in (session, heartbeat, min_s, max_s, min_h, max_h))
    hb, mn_h, mx_h = (
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    )
    st, mn_s, mx_s = (
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    )
    _require(max_h >= min_h, f"{mx_h} must be greater than or equal to {mn_h}", mx_h, max_h)  # type: ignore[operator]
    _require(heartbeat >= min_h, f"{hb} must be greater than or equal to {mn_h}", hb, heartbeat)  # type: ignore[operator]
    _require(heartbeat <= max_h, f"{hb} must be less than or equal to {mx_h}", hb, heartbeat)  # type: ignore[operator]
    _require(max_s >= min_s, f"{mx_s} must be greater than or equal to {mn_s}", mx_s, max_s)  # type: ignore[operator]
    _require(session >= min_s, f"{st} must be greater than or equal to {mn_s}", st, session)  # type: ignore[operator]
    _require(session <= max_s, f"{st} must be less than or equal to {mx_s}", st, session)  # type: ignore[operator]
    _require(heartbeat < session, f"{hb} must be less than {st}", hb, heartbeat)  # type: ignore[operator]
