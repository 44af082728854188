"""Authorization of the controller's AdminService requests, with Kafka's rules per API.

Admin requests reach the controllers directly or forwarded by a broker on behalf of its client (the
node's interceptor then puts the forwarded principal in the request context). Each request is
authorized here, in the request's own task, before the pure controller handler runs: items of a
request the caller may not touch are split off and answered with the resource's
*_AUTHORIZATION_FAILED error, the others go to the handler, and the two answers are merged. A
request the caller may not make at all (Alter on the cluster for ElectLeaders) is answered with
CLUSTER_AUTHORIZATION_FAILED wherever its answer carries errors.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request, denied_error
from kraftlog.metadata_log import ConfigResourceType, MetadataImage
from kraftlog.proto import controller_pb2

__all__ = ["authorize_cluster", "authorize_items"]

WithError = Callable[..., Any]


def authorize_cluster(operation: AclOperation) -> type[kerr.KafkaError] | None:
    """None when the caller may do ``operation`` on the cluster, else the error to answer."""
    if current_request().authorize(operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        return None
    return kerr.ClusterAuthorizationFailedError


def _topic_names(image: MetadataImage, request: Any, field: str) -> list[str]:
    if field == "topic_ids":
        return [t.name for i in request.topic_ids if (t := image.topics.get_by_id(i)) is not None]
    items = getattr(request, field)
    return [item if isinstance(item, str) else item.name for item in items]


def _config_resource(item: Any) -> tuple[ResourceType, str]:
    resource = item.resource
    if resource.resource_type == ConfigResourceType.TOPIC:
        return ResourceType.TOPIC, resource.resource_name
    if resource.resource_type == ConfigResourceType.GROUP:  # DescribeConfigs / AlterConfigs on the group
        return ResourceType.GROUP, resource.resource_name
    return ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME  # broker and broker-logger configs


_TOPIC_RULES: dict[str, tuple[AclOperation, tuple[str, ...], str]] = {
    # request type -> (operation on each topic, request fields holding topics, response list field)
    "CreateTopicsRequest": (AclOperation.CREATE, ("topics",), "topics"),
    "DeleteTopicsRequest": (AclOperation.DELETE, ("names", "topic_ids"), "topics"),
    "CreatePartitionsRequest": (AclOperation.ALTER, ("topics",), "results"),
    "DescribeTopicsRequest": (AclOperation.DESCRIBE, ("names",), "topics"),
}
_CONFIG_RULES: dict[str, tuple[AclOperation, str]] = {
    "DescribeConfigsRequest": (AclOperation.DESCRIBE_CONFIGS, "results"),
    "IncrementalAlterConfigsRequest": (AclOperation.ALTER_CONFIGS, "results"),
}


async def authorize_items(
    image: MetadataImage,
    request: Any,
    response_type: type,
    run: Callable[[Any], Awaitable[Any]],
    with_error: WithError,
) -> Any:
    """Answer ``request`` with ``run`` for the items the caller may touch and an authorization
    error for the others (Kafka's per-topic / per-resource rules; CreateTopics is allowed for all
    topics by Create on the cluster). Order of the answer: allowed items first, refused ones after."""
    ctx = current_request()
    kind = type(request).__name__
    allowed = type(request)()
    allowed.CopyFrom(request)
    refused = type(request)()
    if kind in _TOPIC_RULES:
        operation, fields, out_field = _TOPIC_RULES[kind]
        if kind == "DescribeTopicsRequest" and not request.names:
            return await run(request)  # all topics: the handler's answer is filtered by the caller
        everything = kind == "CreateTopicsRequest" and ctx.authorize(
            AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME
        )
        for field in fields:
            names = _topic_names(image, request, field)
            ok = set(names) if everything else ctx.authorized(operation, ResourceType.TOPIC, names)
            # an unknown topic id stays with the allowed ones: its UNKNOWN_TOPIC_ID reveals nothing
            _split(request, allowed, refused, field, functools.partial(_keep, image, field=field, ok=ok))
        error: type[kerr.KafkaError] = kerr.TopicAuthorizationFailedError
        item_fields = fields
    else:
        operation, out_field = _CONFIG_RULES[kind]
        decisions: dict[tuple[ResourceType, str], bool] = {}
        for item in request.resources:
            rtype, name = _config_resource(item)
            decisions[(rtype, name)] = decisions.get((rtype, name)) or ctx.authorize(operation, rtype, name)
        _split(request, allowed, refused, "resources", lambda item: decisions[_config_resource(item)])
        if not request.resources:
            ctx.public("an empty request touches nothing")
        error = kerr.TopicAuthorizationFailedError  # refined per resource below
        item_fields = ("resources",)
    if not _has_items(refused, item_fields):
        return await run(request)
    response = await run(allowed) if _has_items(allowed, item_fields) else response_type()
    if kind in _CONFIG_RULES:
        for item in refused.resources:
            rtype, _name = _config_resource(item)
            one = type(request)(resources=[item])
            answer = with_error(
                response_type(), type(denied_error(rtype, "")), "not authorized", controller_pb2.ControllerHint(), one
            )
            getattr(response, out_field).extend(getattr(answer, out_field))
        return response
    answer = with_error(response_type(), error, "not authorized", controller_pb2.ControllerHint(), refused)
    getattr(response, out_field).extend(getattr(answer, out_field))
    return response


def _keep(image: MetadataImage, item: Any, *, field: str, ok: set[str]) -> bool:
    name = _name_of(image, item, field)
    return name in ok or (name is None and field == "topic_ids")


def _name_of(image: MetadataImage, item: Any, field: str) -> str | None:
    if field == "topic_ids":
        topic = image.topics.get_by_id(item)
        return topic.name if topic is not None else None
    return item if isinstance(item, str) else str(item.name)


def _split(request: Any, allowed: Any, refused: Any, field: str, keep: Callable[[Any], bool]) -> None:
    """Put each item of ``request.<field>`` in ``allowed`` or ``refused``."""
    allowed.ClearField(field)
    for item in getattr(request, field):
        target = getattr(allowed if keep(item) else refused, field)
        if isinstance(item, str):
            target.append(item)
        else:
            target.add().CopyFrom(item)


def _has_items(request: Any, fields: tuple[str, ...]) -> bool:
    return any(len(getattr(request, field)) > 0 for field in fields)
