"""Dynamic configs: DescribeConfigs and IncrementalAlterConfigs (Kafka's ConfigurationControlManager)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common.config import ConfigError
from kraftlog.metadata_log import ConfigRecord, ConfigResourceType
from kraftlog.metadata_log.image import MetadataImage
from kraftlog.proto import admin_pb2, errors_pb2
from kraftlog.quorum.controller._controller_base import ControllerContext, Records, error_pb
from kraftlog.quorum.controller._topic_control import _validate_topic_configs


def _resource_error(image: MetadataImage, rtype: int, name: str) -> errors_pb2.Error | None:
    if rtype == ConfigResourceType.TOPIC:
        if image.topics.get_by_name(name) is None:
            return error_pb(kerr.UnknownTopicOrPartitionError, f"topic {name!r} does not exist")
        return None
    if rtype == ConfigResourceType.BROKER:
        if name and (not name.isdigit() or image.cluster.broker(int(name)) is None):
            return error_pb(kerr.InvalidRequestError, f"broker {name!r} is not registered")
        return None
    if rtype == ConfigResourceType.GROUP:  # any group id, existing or not; no cluster-wide default
        return error_pb(kerr.InvalidRequestError, "a group config resource needs a group id") if not name else None
    return error_pb(kerr.InvalidRequestError, f"unsupported config resource type {rtype}")


def describe_configs(
    image: MetadataImage, req: admin_pb2.DescribeConfigsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.DescribeConfigsResponse]:
    """DescribeConfigs: a topic's effective configs with their source (dynamic topic config, dynamic
    cluster default, static broker config, or Kafka's default); a group's (its own, source
    GROUP_CONFIG, else the broker's default, as Kafka's ConfigHelper answers)."""
    from kraftlog.common import ConfigType
    from kraftlog.common.config import NODE_CONFIG_DEFS, TOPIC_CONFIG_DEFS, TOPIC_SYNONYMS

    R = admin_pb2.DescribeConfigsResponse
    results = []
    for res in req.resources:
        rtype, name = res.resource.resource_type, res.resource.resource_name
        err = _resource_error(image, rtype, name)
        if err is not None:
            results.append(R.Result(resource=res.resource, error=err))
            continue
        wanted = set(res.config_names)
        entries = []
        if rtype == ConfigResourceType.GROUP:
            entries = _group_entries(image.configs.config(rtype, name), wanted, ctx)
        elif rtype == ConfigResourceType.TOPIC:
            dynamic = image.configs.topic_config(name)
            cluster_dynamic = image.configs.broker_config("")
            defaults = ctx.config.topic_defaults()
            value: str | None
            for key in sorted(TOPIC_CONFIG_DEFS):
                if wanted and key not in wanted:
                    continue
                if key in dynamic:
                    value, source, is_default = dynamic[key], "DYNAMIC_TOPIC_CONFIG", False
                else:
                    synonym = next((s for s in TOPIC_SYNONYMS.get(key, ()) if s in cluster_dynamic), None)
                    if synonym is not None:
                        value = _topic_value(synonym, cluster_dynamic[synonym])
                        source, is_default = "DYNAMIC_DEFAULT_BROKER_CONFIG", False
                    elif any(s in ctx.config.originals for s in TOPIC_SYNONYMS.get(key, ())):
                        value, source, is_default = _fmt(defaults.get(key)), "STATIC_BROKER_CONFIG", False
                    else:
                        value, source, is_default = _fmt(defaults.get(key)), "DEFAULT_CONFIG", True
                entries.append(
                    R.Entry(
                        name=key,
                        value=value or "",
                        has_value=value is not None,
                        read_only=False,
                        is_default=is_default,
                        source=source,
                    )
                )
        else:
            dynamic = image.configs.config(rtype, name)
            for key in sorted(set(dynamic) | ({k for k in NODE_CONFIG_DEFS} if not name else set())):
                if wanted and key not in wanted:
                    continue
                definition = NODE_CONFIG_DEFS.key_for(key)
                # Kafka's rule: every PASSWORD-typed key (keys, JAAS entries, passwords) is sensitive
                sensitive = "password" in key or (definition is not None and definition.type is ConfigType.PASSWORD)
                if key in dynamic:
                    value, source, is_default = (
                        dynamic[key],
                        ("DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                        False,
                    )
                else:
                    value = _fmt(ctx.config.get(key))
                    is_default = key not in ctx.config.originals
                    source = "DEFAULT_CONFIG" if is_default else "STATIC_BROKER_CONFIG"
                entries.append(
                    R.Entry(
                        name=key,
                        value="" if sensitive or value is None else value,
                        has_value=not sensitive and value is not None,
                        read_only=key not in dynamic,
                        is_default=is_default,
                        source=source,
                        is_sensitive=sensitive,
                    )
                )
        results.append(R.Result(resource=res.resource, error=error_pb(), configs=entries))
    return [], R(results=results)


def _group_entries(
    dynamic: Mapping[str, str], wanted: set[str], ctx: ControllerContext
) -> list[admin_pb2.DescribeConfigsResponse.Entry]:
    from kraftlog.common.config import GROUP_CONFIG_DEFS, GROUP_CONFIG_SYNONYMS

    R = admin_pb2.DescribeConfigsResponse
    entries = []
    for key in sorted(GROUP_CONFIG_DEFS):
        if wanted and key not in wanted:
            continue
        own = dynamic.get(key)
        value = own if own is not None else _fmt(ctx.config.get(GROUP_CONFIG_SYNONYMS[key][0]))
        entries.append(
            R.Entry(
                name=key,
                value=value or "",
                has_value=value is not None,
                read_only=False,
                is_default=own is None,
                source="GROUP_CONFIG" if own is not None else "DEFAULT_CONFIG",
            )
        )
    return entries


def _topic_value(broker_key: str, raw: str) -> str:
    """A broker-level synonym's value in its topic key's unit (``log.retention.hours`` 1 ->
    ``retention.ms`` 3600000), as `NodeConfig.topic_defaults` converts static values."""
    from kraftlog.common.config import LONG_MAX, NODE_CONFIG_DEFS

    spec = NODE_CONFIG_DEFS[broker_key]
    try:
        value = spec.parse(raw)
    except (ConfigError, ValueError):
        return raw
    if spec.topic_unit_ms != 1 and isinstance(value, int) and not isinstance(value, bool):
        value = -1 if value < 0 else min(value * spec.topic_unit_ms, LONG_MAX)
    return _fmt(value) or ""


def _fmt(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple, set, frozenset)):
        return ",".join(str(v) for v in value)
    return str(value)


def incremental_alter_configs(
    image: MetadataImage, req: admin_pb2.IncrementalAlterConfigsRequest, ctx: ControllerContext
) -> tuple[Records, admin_pb2.IncrementalAlterConfigsResponse]:
    """IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT per key, validated before any
    record is written; one ConfigRecord per changed key.

    As Kafka: APPEND / SUBTRACT apply only to LIST keys and start from the key's default when it
    is not set (APPEND compact to an unset cleanup.policy gives "delete,compact"); a key named
    twice in one resource, or a resource named twice, is INVALID_REQUEST. A SUBTRACT that would
    leave a list empty is INVALID_CONFIG (an empty cleanup.policy is no policy the log accepts).
    """
    from kraftlog.common.config import (
        DYNAMIC_WITHOUT_EFFECT,
        GROUP_CONFIG_DEFS,
        NODE_CONFIG_DEFS,
        TOPIC_CONFIG_DEFS,
        TOPIC_SYNONYMS,
        ConfigType,
        group_configs,
    )

    R = admin_pb2.IncrementalAlterConfigsResponse
    # What a BROKER resource takes at run time: the broker-wide defaults of topic configs, and the
    # SASL listener keys Kafka reconfigures, which are without effect here (DYNAMIC_WITHOUT_EFFECT).
    dynamic_broker_keys = {s for syns in TOPIC_SYNONYMS.values() for s in syns} | DYNAMIC_WITHOUT_EFFECT
    records: Records = []
    results = []
    resources = [(r.resource.resource_type, r.resource.resource_name) for r in req.resources]
    for res in req.resources:
        rtype, name = res.resource.resource_type, res.resource.resource_name
        if resources.count((rtype, name)) > 1:
            results.append(
                R.Result(
                    resource=res.resource,
                    error=error_pb(
                        kerr.InvalidRequestError, f"resource {name!r} appears more than once in the request"
                    ),
                )
            )
            continue
        err = _resource_error(image, rtype, name)
        if err is not None:
            results.append(R.Result(resource=res.resource, error=err))
            continue
        keys = [op.name for op in res.configs]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            results.append(
                R.Result(
                    resource=res.resource,
                    error=error_pb(kerr.InvalidRequestError, f"config(s) {repeated} appear more than once"),
                )
            )
            continue
        defs = {ConfigResourceType.TOPIC: TOPIC_CONFIG_DEFS, ConfigResourceType.GROUP: GROUP_CONFIG_DEFS}.get(
            rtype, NODE_CONFIG_DEFS
        )
        current = dict(image.configs.config(rtype, name))
        updated = dict(current)
        problem = None
        for op in res.configs:
            if rtype == ConfigResourceType.BROKER and op.name not in dynamic_broker_keys:
                problem = (
                    f"config {op.name!r} cannot be updated dynamically"
                    if op.name in NODE_CONFIG_DEFS
                    else f"unknown broker config {op.name!r}"
                )
                break
            if op.op == 0:
                updated[op.name] = op.value
            elif op.op == 1:
                updated.pop(op.name, None)
            elif op.op in (2, 3):
                spec = defs.get(op.name)
                if spec is None:
                    problem = f"unknown config {op.name!r}"
                    break
                if spec.type is not ConfigType.LIST:
                    verb = "APPEND to" if op.op == 2 else "SUBTRACT from"
                    problem = f"cannot {verb} {op.name!r}: its type is not LIST"
                    break
                base = updated.get(op.name)
                if base is None:
                    base = _fmt(spec.default) or ""
                items = [i.strip() for i in base.split(",") if i.strip()]
                values = [v.strip() for v in op.value.split(",") if v.strip()]
                if op.op == 2:
                    items += [v for v in values if v not in items]
                else:
                    items = [i for i in items if i not in values]
                if not items:
                    problem = f"{op.name!r} cannot become an empty list"
                    break
                updated[op.name] = ",".join(items)
            else:
                problem = f"unknown config operation {op.op}"
                break
        if problem is None and rtype == ConfigResourceType.TOPIC:
            try:
                _validate_topic_configs(updated)
            except ConfigError as exc:
                problem = str(exc)
        elif problem is None and rtype == ConfigResourceType.GROUP:
            try:  # within the broker's group.consumer.* bounds, as Kafka's GroupConfig.validate
                group_configs(updated, ctx.config.get)
            except ConfigError as exc:
                problem = str(exc)
        elif problem is None:
            for k, v in updated.items():
                try:
                    NODE_CONFIG_DEFS[k].parse(v)
                except (ConfigError, ValueError) as exc:
                    problem = f"invalid value {v!r} for {k!r}: {exc}"
                    break
        if problem is not None:
            results.append(R.Result(resource=res.resource, error=error_pb(kerr.InvalidConfigError, problem)))
            continue
        results.append(R.Result(resource=res.resource, error=error_pb()))
        if req.validate_only:
            continue
        for key in sorted(set(current) | set(updated)):
            if current.get(key) != updated.get(key):
                records.append(ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=updated.get(key)))
    return records, R(results=results)
