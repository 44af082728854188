"""Kafka-protocol admin requests. Those that change or read cluster metadata are forwarded to the
active controller, as Kafka's brokers forward them (KIP-590): CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments. DescribeCluster is answered from the
broker's image (it names the brokers' endpoints on this listener), DescribeLogDirs from the
broker's own logs, and DescribeConfigs of this broker's own resource from its node config and
image, as in Kafka.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import NOT_REQUESTED_OPERATIONS, ParsedRequest, ms
from kraftlog.common import errors as kerr
from kraftlog.common.config import (
    CONFIG_SOURCE_IDS,
    CONFIG_TYPE_IDS,
    ConfigSynonym,
    DescribedConfig,
    NodeConfig,
    describe_broker_configs,
)
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.proto import admin_pb2

if TYPE_CHECKING:
    from kraftlog.broker._controller_channel import ControllerChannel
    from kraftlog.broker.replica import ReplicaManager
    from kraftlog.metadata_log import MetadataImage

__all__ = ["AdminApis", "ControllerForwarder"]

_BROKER_RESOURCE = 4  # Kafka's ConfigResource.Type.BROKER
_DYNAMIC_SOURCES = ("DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "GROUP_CONFIG")
_SET, _DELETE = 0, 1


class ControllerForwarder:
    """Forwards a request to the active controller on behalf of the current request's principal
    (KIP-590), as the admin and security handlers do; the controller authorizes it."""

    def __init__(self, channel: ControllerChannel) -> None:
        self._channel = channel

    async def __call__(self, name: str, request: Any) -> Any:
        """``request`` to the active controller; a failed call raises its `KafkaError`."""
        ctx = current_request()
        ctx.delegate("the active controller")
        try:
            return await self._channel.call(
                "admin",
                name,
                request,
                timeout_s=30.0,
                attempt_timeout_s=10.0,
                on_behalf_of=ctx,
            )
        except kerr.KafkaError:
            raise
        except Exception as err:
            raise kerr.CoordinatorNotAvailableError(f"{name}: no active controller answered: {err}") from err


class AdminApis:
    """Admin requests for `KafkaApis`: forwarded (``forward``) or answered from this broker's
    image and logs (``replicas``: there once the broker started)."""

    def __init__(
        self,
        forward: ControllerForwarder,
        *,
        node_id: int,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        log_dirs: Sequence[str],
        replicas: Callable[[], ReplicaManager],
        config: NodeConfig,
    ) -> None:
        self._forward = forward
        self._config = config
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._image = image
        self._log_dirs = log_dirs
        self._replicas = replicas

    # ------------------------------------------------------------------ topics

    async def create_topics(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = admin_pb2.CreateTopicsRequest(
            timeout_ms=ms(body.timeout), validate_only=getattr(body, "validate_only", False)
        )
        for t in body.topics:
            topic = pb.topics.add(name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor)
            for a in t.assignments:
                topic.assignments.add(partition_index=a.partition_index, broker_ids=list(a.broker_ids))
            for c in t.configs:
                if c.value is not None:
                    topic.configs[c.name] = c.value
        try:
            resp = await self._forward("CreateTopics", pb)
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "topics": [_failed(t.name, err) for t in body.topics]}
        results = []
        for r in resp.topics:
            code = r.error.code or resp.error.code
            results.append(
                {
                    "name": r.name,
                    "topic_id": r.topic_id or None,
                    "error_code": code,
                    "error_message": (r.error.message or resp.error.message or None) if code else None,
                    "num_partitions": r.num_partitions if not code else -1,
                    "replication_factor": r.replication_factor if not code else -1,
                    "configs": [],
                }
            )
        return {"throttle_time": resp.throttle_time_ms, "topics": results}

    async def delete_topics(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """v0-5 name topics; v6 names or topic ids (KIP-516)."""
        body = request.body
        pb = admin_pb2.DeleteTopicsRequest(timeout_ms=ms(body.timeout))
        if request.api_version >= 6:
            for t in body.topics:
                if t.name is not None:
                    pb.names.append(t.name)
                elif t.topic_id is not None:
                    pb.topic_ids.append(str(t.topic_id))
        else:
            pb.names.extend(body.topic_names)
        try:
            resp = await self._forward("DeleteTopics", pb)
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "responses": [_failed(n, err) for n in pb.names]}
        return {
            "throttle_time": resp.throttle_time_ms,
            "responses": [
                {
                    "name": r.name or None,
                    "topic_id": r.topic_id or None,
                    "error_code": r.error.code or resp.error.code,
                    "error_message": (r.error.message or None) if r.error.code else None,
                }
                for r in resp.topics
            ],
        }

    async def create_partitions(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = admin_pb2.CreatePartitionsRequest(timeout_ms=ms(body.timeout), validate_only=body.validate_only)
        for t in body.topics:
            topic = pb.topics.add(name=t.name, count=t.count)
            for i, a in enumerate(t.assignments or ()):
                topic.assignments.add(partition_index=i, broker_ids=list(a.broker_ids))
        try:
            resp = await self._forward("CreatePartitions", pb)
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "results": [_failed(t.name, err) for t in body.topics]}
        return {
            "throttle_time": resp.throttle_time_ms,
            "results": [_result(r.name, r.error, resp.error) for r in resp.results],
        }

    # ------------------------------------------------------------------ configs

    async def describe_configs(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """The broker resource naming this broker is answered here, from this broker's node config
        and image, as Kafka's broker answers it (the static layer is this broker's own); every
        other resource is forwarded to the active controller, naming this broker, whose dynamic
        config is a topic key's DYNAMIC_BROKER_CONFIG layer. Results in the request's order."""
        body = request.body
        synonyms = bool(getattr(body, "include_synonyms", False))
        documentation = bool(getattr(body, "include_documentation", False))
        if not body.resources:
            current_request().public("an empty DescribeConfigs touches nothing")
        own = str(self._node_id)
        answers: list[dict[str, Any] | None] = [
            self._describe_own(r, synonyms, documentation)
            if r.resource_type == _BROKER_RESOURCE and r.resource_name == own
            else None
            for r in body.resources
        ]
        forwarded = [r for r, answer in zip(body.resources, answers, strict=True) if answer is None]
        if forwarded:
            by_resource = await self._describe_forwarded(forwarded, synonyms, documentation)
            missing = kerr.UnknownServerError("the controller's answer lacks this resource")
            answers = [
                answer
                if answer is not None
                else (
                    by_resource.get((r.resource_type, r.resource_name))
                    or [{**_resource_failed(r, missing), "configs": []}]
                ).pop(0)
                for r, answer in zip(body.resources, answers, strict=True)
            ]
        return {"throttle_time": 0, "results": answers}

    def _describe_own(self, resource: Any, synonyms: bool, documentation: bool) -> dict[str, Any]:
        """This broker's configs (Kafka's ConfigHelper for a broker id that is its own), with
        DescribeConfigs on the cluster, as Kafka asks."""
        named = {"resource_type": resource.resource_type, "resource_name": resource.resource_name}
        if not current_request().authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            err = kerr.ClusterAuthorizationFailedError("not authorized")
            return {**_failed(None, err), **named, "configs": []}
        configs = self._image().configs
        described = describe_broker_configs(
            self._config,
            configs.broker_config(self._node_id),
            configs.broker_config(""),
            set(resource.configuration_keys or ()),
        )
        entries = [_config_entry(d, synonyms=synonyms, documentation=documentation) for d in described]
        return {"error_code": 0, "error_message": None, **named, "configs": entries}

    async def _describe_forwarded(
        self, resources: Sequence[Any], synonyms: bool, documentation: bool
    ) -> dict[tuple[int, str], list[dict[str, Any]]]:
        """The controller's answers for ``resources``, by resource (a resource asked twice has
        two answers, in order)."""
        pb = admin_pb2.DescribeConfigsRequest(
            include_synonyms=synonyms, include_documentation=documentation, broker_id=self._node_id
        )
        for r in resources:
            res = pb.resources.add(config_names=list(r.configuration_keys or ()))
            res.resource.resource_type = r.resource_type
            res.resource.resource_name = r.resource_name
        by_resource: dict[tuple[int, str], list[dict[str, Any]]] = {}
        try:
            resp = await self._forward("DescribeConfigs", pb)
        except kerr.KafkaError as err:
            for r in resources:
                by_resource.setdefault((r.resource_type, r.resource_name), []).append(
                    {**_resource_failed(r, err), "configs": []}
                )
            return by_resource
        for r in resp.results:
            code = r.error.code or resp.error.code
            by_resource.setdefault((r.resource.resource_type, r.resource.resource_name), []).append(
                {
                    "error_code": code,
                    "error_message": (r.error.message or None) if code else None,
                    "resource_type": r.resource.resource_type,
                    "resource_name": r.resource.resource_name,
                    "configs": [
                        _config_entry(_described(c), synonyms=True, documentation=c.HasField("documentation"))
                        for c in r.configs
                    ],
                }
            )
        return by_resource

    async def incremental_alter_configs(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        ops = [
            (r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs])
            for r in body.resources
        ]
        return await self._alter_configs(ops, body.validate_only)

    async def alter_configs(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """AlterConfigs replaces a resource's whole dynamic config: the keys given are set, every
        other dynamic key is deleted (done as IncrementalAlterConfigs after a DescribeConfigs)."""
        body = request.body
        describe = admin_pb2.DescribeConfigsRequest()
        for r in body.resources:
            res = describe.resources.add()
            res.resource.resource_type = r.resource_type
            res.resource.resource_name = r.resource_name
        try:
            current = await self._forward("DescribeConfigs", describe)
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "responses": [_resource_failed(r, err) for r in body.resources]}
        dynamic: dict[tuple[int, str], set[str]] = {}
        for res in current.results:
            key = (res.resource.resource_type, res.resource.resource_name)
            dynamic[key] = {c.name for c in res.configs if c.source in _DYNAMIC_SOURCES}
        ops = []
        for r in body.resources:
            given = [(c.name, _SET, c.value) for c in r.configs if c.value is not None]
            names = {name for name, _op, _value in given}
            stale = sorted(dynamic.get((r.resource_type, r.resource_name), set()) - names)
            ops.append((r.resource_type, r.resource_name, given + [(name, _DELETE, None) for name in stale]))
        return await self._alter_configs(ops, body.validate_only)

    async def _alter_configs(
        self, resources: Iterable[tuple[int, str, list[tuple[str, int, str | None]]]], validate_only: bool
    ) -> dict[str, Any]:
        resources = list(resources)
        pb = admin_pb2.IncrementalAlterConfigsRequest(validate_only=validate_only)
        for resource_type, resource_name, ops in resources:
            res = pb.resources.add()
            res.resource.resource_type = resource_type
            res.resource.resource_name = resource_name
            for name, op, value in ops:
                res.configs.add(name=name, op=op, value=value or "")
        try:
            resp = await self._forward("IncrementalAlterConfigs", pb)
        except kerr.KafkaError as err:
            return {
                "throttle_time": 0,
                "responses": [
                    {**_failed(None, err), "resource_type": t, "resource_name": n} for t, n, _ops in resources
                ],
            }
        return {
            "throttle_time": 0,
            "responses": [
                {
                    **_result(None, r.error, resp.error),
                    "resource_type": r.resource.resource_type,
                    "resource_name": r.resource.resource_name,
                }
                for r in resp.results
            ],
        }

    # ------------------------------------------------------------------ features

    async def update_features(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """UpdateFeatures (API 57), forwarded; all or nothing, so v0-1's per-feature results all
        carry the request's error (v2 has only the top-level one, as Kafka 3.8+)."""
        body = request.body
        pb = admin_pb2.UpdateFeaturesRequest(validate_only=bool(getattr(body, "validate_only", False)))
        for u in body.feature_updates:
            # v0 has allow_downgrade instead of upgrade_type: a downgrade it allows is the safe kind
            kind = getattr(u, "upgrade_type", None)
            if kind is None:
                kind = 2 if getattr(u, "allow_downgrade", False) else 1
            pb.updates.add(feature=u.feature, max_version_level=u.max_version_level, upgrade_type=kind)
        try:
            resp = await self._forward("UpdateFeatures", pb)
            code, message = resp.error.code, (resp.error.message or None) if resp.error.code else None
        except kerr.KafkaError as err:
            code, message = err.error_code, str(err)
        out: dict[str, Any] = {"throttle_time": 0, "error_code": code, "error_message": message}
        if request.api_version < 2:
            out["results"] = [
                {"feature": u.feature, "error_code": code, "error_message": message} for u in body.feature_updates
            ]
        return out

    # ------------------------------------------------------------------ partitions

    async def elect_leaders(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = admin_pb2.ElectLeadersRequest(election_type=getattr(body, "election_type", 0), timeout_ms=ms(body.timeout))
        for t in body.topic_partitions or ():
            pb.topic_partitions.add(topic=t.topic, partitions=list(t.partitions))
        try:
            resp = await self._forward("ElectLeaders", pb)
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "error_code": err.error_code, "replica_election_results": []}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in resp.results:
            by_topic.setdefault(r.topic, []).append(
                {
                    "partition_id": r.partition,
                    "error_code": r.error.code,
                    "error_message": (r.error.message or None) if r.error.code else None,
                }
            )
        return {
            "throttle_time": 0,
            "error_code": resp.error.code,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()],
        }

    async def alter_partition_reassignments(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = admin_pb2.AlterPartitionReassignmentsRequest(timeout_ms=ms(body.timeout))
        for t in body.topics:
            topic = pb.topics.add(name=t.name)
            for p in t.partitions:
                topic.partitions.add(
                    partition_index=p.partition_index, replicas=list(p.replicas or ()), cancel=p.replicas is None
                )
        try:
            resp = await self._forward("AlterPartitionReassignments", pb)
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "error_code": err.error_code, "error_message": str(err), "responses": []}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in resp.results:
            by_topic.setdefault(r.topic, []).append(
                {
                    "partition_index": r.partition,
                    "error_code": r.error.code,
                    "error_message": (r.error.message or None) if r.error.code else None,
                }
            )
        return {
            "throttle_time": 0,
            "error_code": resp.error.code,
            "error_message": (resp.error.message or None) if resp.error.code else None,
            "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }

    async def list_partition_reassignments(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = admin_pb2.ListPartitionReassignmentsRequest()
        for t in body.topics or ():
            pb.topics.add(topic=t.name, partitions=list(t.partition_indexes))
        try:
            resp = await self._forward("ListPartitionReassignments", pb)
        except kerr.KafkaError as err:
            return {"throttle_time": 0, "error_code": err.error_code, "error_message": str(err), "topics": []}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in resp.reassignments:
            by_topic.setdefault(r.topic, []).append(
                {
                    "partition_index": r.partition,
                    "replicas": list(r.replicas),
                    "adding_replicas": list(r.adding_replicas),
                    "removing_replicas": list(r.removing_replicas),
                }
            )
        return {
            "throttle_time": 0,
            "error_code": resp.error.code,
            "error_message": (resp.error.message or None) if resp.error.code else None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }

    # ------------------------------------------------------------------ answered by this broker

    async def describe_cluster(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """The unfenced brokers' endpoints on this listener. KIP-919's controller endpoints
        (endpoint_type 2) are not served: kraftlog's controllers speak gRPC only. Any principal may
        ask, as in Kafka; the cluster's authorized operations (KIP-430), when asked, are 0 without
        Describe on the cluster."""
        current_request().public("DescribeCluster answers any authenticated principal, as Kafka's")
        if getattr(request.body, "endpoint_type", 1) != 1:
            return {
                "throttle_time": 0,
                "error_code": kerr.UnsupportedEndpointTypeError.error_code,
                "error_message": "the controllers have no Kafka-protocol listener",
                "endpoint_type": request.body.endpoint_type,
                "cluster_id": self._cluster_id,
                "controller_id": -1,
                "brokers": [],
            }
        image = self._image()
        brokers = []
        for bid in image.cluster.broker_ids():
            reg = image.cluster.broker(bid)
            ep = None if reg is None or reg.fenced else reg.endpoint(conn.listener_name)
            if reg is not None and ep is not None:
                brokers.append({"broker_id": bid, "host": ep.host, "port": ep.port, "rack": reg.rack or None})
        return {
            "throttle_time": 0,
            "error_code": 0,
            "endpoint_type": 1,
            "cluster_id": self._cluster_id,
            "controller_id": self._node_id,  # it forwards admin requests (see Metadata)
            "brokers": brokers,
            "cluster_authorized_operations": current_request().authorized_operations(
                ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, needs_describe=True
            )
            if request.body.include_cluster_authorized_operations
            else NOT_REQUESTED_OPERATIONS,
        }

    async def describe_log_dirs(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """This broker's log directories with the size of each partition's log (topics null:
        every partition) and, v4+, the directory's total and usable bytes. Without Describe on the
        cluster the answer is CLUSTER_AUTHORIZATION_FAILED with no directories (Kafka's answer)."""
        if not current_request().authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            return {"throttle_time": 0, "error_code": kerr.ClusterAuthorizationFailedError.error_code, "results": []}
        wanted = request.body.topics
        selected: set[tuple[str, int]] | None = (
            None if wanted is None else {(t.topic, p) for t in wanted for p in t.partitions}
        )
        by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {str(d): {} for d in self._log_dirs}
        for (topic, pid), part in self._replicas().partitions().items():
            if selected is not None and (topic, pid) not in selected:
                continue
            log = part.log
            log_dir = str(log.dir.parent)
            lag = max(0, log.high_watermark - log.log_end_offset)  # Kafka's offset lag of a current log
            by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(
                {"partition_index": pid, "partition_size": log.size_bytes, "offset_lag": lag, "is_future_key": False}
            )
        results = []
        for log_dir, topics in by_dir.items():
            try:
                st = os.statvfs(log_dir)
                total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
                code = 0
            except OSError:
                total = usable = -1
                code = kerr.KafkaStorageError.error_code
            results.append(
                {
                    "error_code": code,
                    "log_dir": log_dir,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                    "total_bytes": total,
                    "usable_bytes": usable,
                }
            )
        return {"throttle_time": 0, "error_code": 0, "results": results}


def _described(c: admin_pb2.DescribeConfigsResponse.Entry) -> DescribedConfig:
    """A controller's entry (the flags already applied: no synonyms unless asked)."""
    return DescribedConfig(
        name=c.name,
        value=c.value if c.has_value and not c.is_sensitive else None,
        source=c.source,
        read_only=c.read_only,
        is_sensitive=c.is_sensitive,
        synonyms=tuple(
            ConfigSynonym(s.name, s.value if s.has_value and not c.is_sensitive else None, s.source) for s in c.synonyms
        ),
        config_type=c.config_type,
        documentation=c.documentation,
    )


def _config_entry(d: DescribedConfig, *, synonyms: bool, documentation: bool) -> dict[str, Any]:
    """One DescribeConfigs entry with Kafka's ids for the source and the type; the synonyms and the
    documentation only when asked (empty and null otherwise, as Kafka answers)."""
    return {
        "name": d.name,
        "value": None if d.is_sensitive else d.value,
        "read_only": d.read_only,
        "config_source": CONFIG_SOURCE_IDS.get(d.source, 0),
        "is_default": d.is_default,
        "is_sensitive": d.is_sensitive,
        "synonyms": [
            {"name": s.name, "value": None if d.is_sensitive else s.value, "source": CONFIG_SOURCE_IDS.get(s.source, 0)}
            for s in d.synonyms
        ]
        if synonyms
        else [],
        "config_type": CONFIG_TYPE_IDS.get(d.config_type, 0),
        "documentation": d.documentation if documentation else None,
    }


def _failed(name: str | None, err: kerr.KafkaError) -> dict[str, Any]:
    return {"name": name, "error_code": err.error_code, "error_message": str(err)}


def _resource_failed(resource: Any, err: kerr.KafkaError) -> dict[str, Any]:
    return {**_failed(None, err), "resource_type": resource.resource_type, "resource_name": resource.resource_name}


def _result(name: str | None, error: Any, whole: Any) -> dict[str, Any]:
    code = error.code or whole.code
    return {
        "name": name,
        "error_code": code,
        "error_message": (error.message or whole.message or None) if code else None,
    }
