"""Dynamic configs: DescribeConfigs and IncrementalAlterConfigs (Kafka's ConfigurationControlManager)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common.config import NO_DEFAULT, ConfigError, ConfigSynonym, node_defaults
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
    """DescribeConfigs: a topic's effective configs with their source (dynamic topic config, the
    asking broker's dynamic config, dynamic cluster default, static broker config, or Kafka's
    default); a broker's (its dynamic config, the cluster default, static, default); a group's (its
    own, source GROUP_CONFIG, else the broker's default, as Kafka's ConfigHelper answers).

    Each entry carries Kafka's config type and, when asked, the schema's documentation and the
    synonyms in Kafka's order (see `kraftlog.common.config.layered_synonyms`); the first synonym
    is the entry's source. The static layer is this controller's node config."""
    R = admin_pb2.DescribeConfigsResponse
    results = []
    asking = str(req.broker_id) if req.HasField("broker_id") else None
    for res in req.resources:
        rtype, name = res.resource.resource_type, res.resource.resource_name
        err = _resource_error(image, rtype, name)
        if err is not None:
            results.append(R.Result(resource=res.resource, error=err))
            continue
        wanted = set(res.config_names)
        if rtype == ConfigResourceType.GROUP:
            entries = _group_entries(image.configs.config(rtype, name), wanted, ctx)
        elif rtype == ConfigResourceType.TOPIC:
            entries = _topic_entries(image, name, asking, wanted, ctx)
        else:
            entries = _broker_entries(image, name, wanted, ctx)
        for entry in entries:
            if not req.include_synonyms:
                del entry.synonyms[:]
            if not req.include_documentation:
                entry.ClearField("documentation")
        results.append(R.Result(resource=res.resource, error=error_pb(), configs=entries))
    return [], R(results=results)


def _synonym_pbs(synonyms: Iterable[ConfigSynonym]) -> list[admin_pb2.DescribeConfigsResponse.Synonym]:
    return [
        admin_pb2.DescribeConfigsResponse.Synonym(
            name=s.name, value=s.value or "", has_value=s.value is not None, source=s.source
        )
        for s in synonyms
    ]


def _topic_entries(
    image: MetadataImage, topic: str, asking: str | None, wanted: set[str], ctx: ControllerContext
) -> list[admin_pb2.DescribeConfigsResponse.Entry]:
    """A topic's keys. The value is the first synonym's, in the topic key's unit (a broker key in
    hours gives milliseconds); with no synonym at all, the topic key's own default."""
    from kraftlog.common.config import TOPIC_CONFIG_DEFS, TOPIC_SYNONYMS, config_type_name, layered_synonyms

    dynamic = image.configs.topic_config(topic)
    layers: list[tuple[str, Mapping[str, object]]] = []
    if asking is not None:
        layers.append(("DYNAMIC_BROKER_CONFIG", image.configs.broker_config(asking)))
    layers += [
        ("DYNAMIC_DEFAULT_BROKER_CONFIG", image.configs.broker_config("")),
        ("STATIC_BROKER_CONFIG", ctx.config.originals),
    ]
    static_defaults = ctx.config.topic_defaults()
    entries = []
    for key in sorted(TOPIC_CONFIG_DEFS):
        if wanted and key not in wanted:
            continue
        spec = TOPIC_CONFIG_DEFS[key]
        broker_keys = TOPIC_SYNONYMS.get(key, ())
        synonyms = layered_synonyms(
            broker_keys, [*layers, ("DEFAULT_CONFIG", node_defaults(broker_keys))], sensitive=False
        )
        if not broker_keys and spec.default is not NO_DEFAULT:  # a key no broker key defaults (KIP-1191's)
            synonyms.append(ConfigSynonym(key, _fmt(spec.default), "DEFAULT_CONFIG"))
        if key in dynamic:
            synonyms.insert(0, ConfigSynonym(key, dynamic[key], "DYNAMIC_TOPIC_CONFIG"))
        head = synonyms[0] if synonyms else None
        value: str | None
        if head is None:
            value = _fmt(spec.default if spec.default is not NO_DEFAULT else None)
        elif head.source == "DYNAMIC_TOPIC_CONFIG":
            value = head.value
        elif head.source in ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"):
            value = _topic_value(head.name, head.value or "")
        else:  # static or default: the node config resolved the broker keys' precedence already
            value = _fmt(static_defaults.get(key))
        source = head.source if head is not None else "DEFAULT_CONFIG"
        entries.append(
            admin_pb2.DescribeConfigsResponse.Entry(
                name=key,
                value=value or "",
                has_value=value is not None,
                read_only=False,
                is_default=source == "DEFAULT_CONFIG",
                source=source,
                synonyms=_synonym_pbs(synonyms),
                config_type=config_type_name(spec),
                documentation=spec.doc,
            )
        )
    return entries


def _broker_entries(
    image: MetadataImage, broker: str, wanted: set[str], ctx: ControllerContext
) -> list[admin_pb2.DescribeConfigsResponse.Entry]:
    """A broker's keys (``broker`` "": the cluster-wide default), the static layer this
    controller's (see `kraftlog.common.config.describe_broker_configs`; a broker answers its own
    resource itself)."""
    from kraftlog.common.config import describe_broker_configs

    own = image.configs.broker_config(broker) if broker else {}
    described = describe_broker_configs(ctx.config, own, image.configs.broker_config(""), wanted)
    return [
        admin_pb2.DescribeConfigsResponse.Entry(
            name=d.name,
            value=d.value or "",
            has_value=d.value is not None,
            read_only=d.read_only,
            is_default=d.is_default,
            source=d.source,
            is_sensitive=d.is_sensitive,
            synonyms=_synonym_pbs(d.synonyms),
            config_type=d.config_type,
            documentation=d.documentation,
        )
        for d in described
    ]


def _group_entries(
    dynamic: Mapping[str, str], wanted: set[str], ctx: ControllerContext
) -> list[admin_pb2.DescribeConfigsResponse.Entry]:
    """A group's keys. As Kafka's, the one synonym names the group key itself, with the group's
    own value (GROUP_CONFIG) or the broker default it falls back to (DEFAULT_CONFIG)."""
    from kraftlog.common.config import GROUP_CONFIG_DEFS, GROUP_CONFIG_SYNONYMS, config_type_name

    R = admin_pb2.DescribeConfigsResponse
    entries = []
    for key in sorted(GROUP_CONFIG_DEFS):
        if wanted and key not in wanted:
            continue
        own = dynamic.get(key)
        spec = GROUP_CONFIG_DEFS[key]
        synonym = GROUP_CONFIG_SYNONYMS.get(key)
        default = ctx.config.get(synonym[0]) if synonym is not None else spec.default
        value = own if own is not None else _fmt(default)
        source = "GROUP_CONFIG" if own is not None else "DEFAULT_CONFIG"
        entries.append(
            R.Entry(
                name=key,
                value=value or "",
                has_value=value is not None,
                read_only=False,
                is_default=own is None,
                source=source,
                synonyms=_synonym_pbs([ConfigSynonym(key, value, source)]),
                config_type=config_type_name(spec),
                documentation=spec.doc,
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
        DYNAMIC_BROKER_KEYS,
        GROUP_CONFIG_DEFS,
        NODE_CONFIG_DEFS,
        TOPIC_CONFIG_DEFS,
        ConfigType,
        group_configs,
        share_group_configs,
    )

    R = admin_pb2.IncrementalAlterConfigsResponse
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
            if rtype == ConfigResourceType.BROKER and op.name not in DYNAMIC_BROKER_KEYS:
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
                share_group_configs(updated, ctx.config.get)
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
