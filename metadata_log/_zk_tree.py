"""The metadata image laid out as the ZooKeeper tree it replaces, in ZooKeeper-mode Kafka's formats
(``kafka.zk.ZkData`` of Kafka 3.x): the one builder behind ``kraftlog metadata tree``, used offline
on an image replayed from files and online by the controller on its committed image
(``DescribeMetadataTree``), so that both trees of one log are equal.

A pure function of the image, its `MetadataProvenance` and the cluster id: no clock, no I/O. Every
field that ZooKeeper filled in from a clock comes from the log instead: a broker's ``timestamp`` is
the time of the entry that registered it, ``/controller``'s the time of the first entry its epoch's
leader committed (see `MetadataProvenance`).

What is drawn where (ordering: paths by component, numbers numerically):

- ``/brokers/ids/<id>``: BrokerIdZNode v5 (``host``/``port`` of the first PLAINTEXT Kafka listener,
  else null and -1; ``endpoints`` ``NAME://host:port`` of the Kafka listeners the broker registered,
  by listener name, without its gRPC listener; ``listener_security_protocol_map``; ``jmx_port`` -1;
  ``features``), plus the KRaft fields ``epoch``, ``fenced``, ``in_controlled_shutdown`` and
  ``incarnation_id``;
- ``/brokers/topics/<t>`` (TopicZNode v3), ``.../partitions/<p>/state`` (v1, with KRaft's
  ``partition_epoch``), ``/config/topics/<t>`` (every topic, empty when at defaults),
  ``/admin/reassign_partitions`` (the partitions moving);
- ``/cluster/id``, ``/controller`` (ControllerZNode v2, as a KRaft controller wrote it during a
  migration), ``/controller_epoch``, ``/latest_producer_id_block``, ``/config/brokers/<id|<default>>``;
- ACLs under ``/kafka-acl/<ResourceType>/<name>`` (LITERAL) and
  ``/kafka-acl-extended/<pattern>/<ResourceType>/<name>``; SCRAM users and client quotas under
  ``/config/users``, ``/config/clients``, ``/config/ips``. A SCRAM mechanism shows its iteration
  count only (``iterations=4096``): salts and keys are never printed.

`ZkTreeScope` leaves out what a caller may not describe (the controller fills it from its
authorizer), so a tree drawn for a restricted principal is the full tree minus those nodes.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kraftlog.common import kafka_uuid
from kraftlog.common.security import BROKER_LISTENER
from kraftlog.metadata_log._provenance import MetadataProvenance
from kraftlog.metadata_log._records import BrokerEndpoint, ConfigResourceType, LeaderRecoveryState, QuotaEntity
from kraftlog.metadata_log.image import BrokerRegistration, MetadataImage

__all__ = ["ZkTreeScope", "zk_tree_nodes", "zk_quota_nodes", "zk_sanitize"]

ZkNode = tuple[str, Any]

# The data versions of the nodes drawn here, as Kafka 3.x wrote them.
_BROKER_VERSION = 5
_TOPIC_VERSION = 3
_CONTROLLER_VERSION = 2
_NO_JMX_PORT = -1

# Kafka's ZooKeeper ACL stores: LITERAL patterns under /kafka-acl, every other pattern type under
# /kafka-acl-extended/<pattern type in lower case> (LiteralAclStore / ExtendedAclStore).
_LITERAL_ACL_ROOT = "/kafka-acl"
_EXTENDED_ACL_ROOT = "/kafka-acl-extended"


@dataclass(frozen=True)
class ZkTreeScope:
    """Which nodes the tree may show; None or True: all of that kind.

    ``topics``: the topics whose assignment and partition states show (Describe on the topic);
    ``topic_configs``: those whose ``/config/topics`` node shows (DescribeConfigs on the topic);
    ``cluster``: ACLs, SCRAM users, reassignments and the producer id block (Describe on the
    cluster, as DescribeAcls, DescribeUserScramCredentials and ListPartitionReassignments need);
    ``cluster_configs``: broker configs and client quotas (DescribeConfigs on the cluster). Broker
    registrations, the cluster id and the controller show to everyone, as DescribeCluster does.
    """

    topics: frozenset[str] | None = None
    topic_configs: frozenset[str] | None = None
    cluster: bool = True
    cluster_configs: bool = True

    ALL: ClassVar[ZkTreeScope]

    def omitted(self) -> list[str]:
        """What this scope leaves out, in words (for the reader of a partial tree)."""
        out = []
        if self.topics is not None:
            out.append("topics the caller may not describe")
        if self.topic_configs is not None:
            out.append("configs of topics the caller may not describe the configs of")
        if not self.cluster:
            out.append("ACLs, SCRAM users, reassignments and the producer id block (Describe on the cluster)")
        if not self.cluster_configs:
            out.append("broker configs and client quotas (DescribeConfigs on the cluster)")
        return out


ZkTreeScope.ALL = ZkTreeScope()


def _id_text(value: str) -> str:
    """A topic or incarnation id as Kafka's tools show it (22-character base64); an id that is no
    UUID as it came."""
    try:
        return kafka_uuid(value)
    except ValueError:
        return value


def zk_sanitize(name: str) -> str:
    """A user name as a ZooKeeper config node name (Kafka's ``Sanitizer.sanitize``: URL encoding in
    UTF-8 with ``%20`` for a space and ``%2A`` for ``*``; Java's encoder also encodes ``~``)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def _path_order(path: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key: path components, numbers numerically (partition 10 after 9)."""
    return tuple((0, int(c), "") if c.isdigit() else (1, 0, c) for c in path.split("/"))


def _config_node(values: Mapping[str, Any]) -> dict[str, Any]:
    return {"version": 1, "config": dict(sorted(values.items()))}


def _kafka_endpoints(reg: BrokerRegistration) -> list[BrokerEndpoint]:
    """The broker's Kafka-protocol listeners as registered (its gRPC listener, registered as
    ``BROKER``, speaks no Kafka protocol and is left out)."""
    return [ep for ep in reg.endpoints if ep.name != BROKER_LISTENER]


def _broker_node(reg: BrokerRegistration, registered_ms: int | None, features: Mapping[str, int]) -> dict[str, Any]:
    """BrokerIdZNode v5. ``features``: each finalized feature at its level, as the range
    ``{"min_version": level, "max_version": level}`` (the controller finalizes a level only every
    registered broker supports; brokers register no wider ranges)."""
    endpoints = _kafka_endpoints(reg)
    # ZooKeeper's top-level host/port: the first PLAINTEXT endpoint, else null and -1
    plaintext = next((ep for ep in endpoints if ep.security_protocol == "PLAINTEXT"), None)
    return {
        "version": _BROKER_VERSION,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "jmx_port": _NO_JMX_PORT,
        "timestamp": None if registered_ms is None else str(registered_ms),
        "endpoints": [f"{ep.name}://{ep.host}:{ep.port}" for ep in endpoints],
        "listener_security_protocol_map": {ep.name: ep.security_protocol for ep in endpoints},
        "rack": reg.rack,
        "features": {
            name: {"min_version": level, "max_version": level} for name, level in sorted(features.items()) if level > 0
        },
        "epoch": reg.broker_epoch,
        "fenced": reg.fenced,
        "in_controlled_shutdown": reg.in_controlled_shutdown,
        "incarnation_id": _id_text(reg.incarnation_id),
    }


def _quota_value_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _quota_name(name: str | None) -> str:
    return "<default>" if name is None else zk_sanitize(name)


def zk_quota_nodes(entities: Iterable[tuple[QuotaEntity, Mapping[str, float]]]) -> dict[str, dict[str, str]]:
    """ZooKeeper quota node path -> its config, for ``(entity, values)`` pairs (an entity being
    ``(entity_type, name or None)`` pairs): ``/config/users/<u>[/clients/<c>]``,
    ``/config/clients/<c>``, ``/config/ips/<ip>``, ``<default>`` standing for a default entity."""
    nodes: dict[str, dict[str, str]] = {}
    for entity, values in entities:
        parts = dict(entity)
        if "user" in parts and "client-id" in parts:
            path = f"/config/users/{_quota_name(parts['user'])}/clients/{_quota_name(parts['client-id'])}"
        elif "user" in parts:
            path = f"/config/users/{_quota_name(parts['user'])}"
        elif "client-id" in parts:
            path = f"/config/clients/{_quota_name(parts['client-id'])}"
        elif "ip" in parts:
            path = f"/config/ips/{_quota_name(parts['ip'])}"
        else:
            continue
        nodes[path] = {key: _quota_value_text(v) for key, v in sorted(values.items())}
    return nodes


def _acl_nodes(image: MetadataImage) -> dict[str, list[dict[str, str]]]:
    """The ACL entries of each ZooKeeper ACL node, in Kafka's JSON shape (``AclEntry.toMap``),
    sorted so the output is stable."""
    nodes: dict[str, list[dict[str, str]]] = {}
    for b in image.acls.acls.values():
        root = _LITERAL_ACL_ROOT
        if b.pattern_type.name != "LITERAL":
            root = f"{_EXTENDED_ACL_ROOT}/{b.pattern_type.name.lower()}"
        nodes.setdefault(f"{root}/{b.resource_type.display_name}/{b.resource_name}", []).append(
            {
                "host": b.host,
                "permissionType": b.permission_type.display_name,
                "operation": b.operation.display_name,
                "principal": b.principal,
            }
        )
    for entries in nodes.values():
        entries.sort(key=lambda e: (e["principal"], e["host"], e["operation"], e["permissionType"]))
    return nodes


def _topic_nodes(image: MetadataImage, provenance: MetadataProvenance, scope: ZkTreeScope) -> list[ZkNode]:
    nodes: list[ZkNode] = []
    reassigning = []
    for name in sorted(image.topics.by_name):
        if scope.topics is not None and name not in scope.topics:
            continue
        topic = image.topics.by_name[name]
        parts = [(pid, topic.partitions[pid]) for pid in sorted(topic.partitions)]
        nodes.append(
            (
                f"/brokers/topics/{name}",
                {
                    "version": _TOPIC_VERSION,
                    "topic_id": _id_text(topic.topic_id),
                    "partitions": {str(pid): list(p.replicas) for pid, p in parts},
                    "adding_replicas": {str(pid): list(p.adding_replicas) for pid, p in parts if p.adding_replicas},
                    "removing_replicas": {
                        str(pid): list(p.removing_replicas) for pid, p in parts if p.removing_replicas
                    },
                },
            )
        )
        for pid, p in parts:
            state: dict[str, Any] = {
                "version": 1,
                "controller_epoch": provenance.partition_epochs.get((topic.topic_id, pid)),
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "isr": list(p.isr),
                "partition_epoch": p.partition_epoch,
            }
            if p.leader_recovery_state != LeaderRecoveryState.RECOVERED:  # as Kafka wrote it: only then
                state["leader_recovery_state"] = p.leader_recovery_state
            nodes.append((f"/brokers/topics/{name}/partitions/{pid}/state", state))
            if p.adding_replicas or p.removing_replicas:
                reassigning.append(
                    {
                        "topic": name,
                        "partition": pid,
                        "replicas": list(p.replicas),
                        "target_replicas": [r for r in p.replicas if r not in p.removing_replicas],
                        "adding_replicas": list(p.adding_replicas),
                        "removing_replicas": list(p.removing_replicas),
                    }
                )
        if scope.topic_configs is None or name in scope.topic_configs:
            values = image.configs.resources.get((ConfigResourceType.TOPIC, name), {})
            nodes.append((f"/config/topics/{name}", _config_node(values)))
    if reassigning and scope.cluster:
        nodes.append(("/admin/reassign_partitions", {"version": 1, "partitions": reassigning}))
    return nodes


def zk_tree_nodes(
    image: MetadataImage,
    provenance: MetadataProvenance,
    *,
    cluster_id: str | None = None,
    scope: ZkTreeScope = ZkTreeScope.ALL,
) -> list[ZkNode]:
    """The ZooKeeper nodes of ``image`` as ``(path, data)``, ``data`` JSON-ready, in tree order."""
    nodes: list[ZkNode] = []
    registered_ms = provenance.broker_registered_ms
    for bid in sorted(image.cluster.brokers):
        reg = image.cluster.brokers[bid]
        nodes.append((f"/brokers/ids/{bid}", _broker_node(reg, registered_ms.get(bid), image.features.levels)))
    nodes += _topic_nodes(image, provenance, scope)
    if cluster_id:
        nodes.append(("/cluster/id", {"version": "1", "id": cluster_id}))
    if provenance.controller is not None:
        controller_id, controller_epoch, elected_ms = provenance.controller
        nodes.append(
            (
                "/controller",
                {
                    "version": _CONTROLLER_VERSION,
                    "brokerid": controller_id,
                    "timestamp": str(elected_ms),
                    "kraftControllerEpoch": controller_epoch,
                },
            )
        )
    if image.epoch >= 0:
        nodes.append(("/controller_epoch", image.epoch))
    if scope.cluster_configs:
        for (rtype, rname), values in image.configs.resources.items():
            if rtype == ConfigResourceType.BROKER and values:
                nodes.append((f"/config/brokers/{rname or '<default>'}", _config_node(values)))
    configs: dict[str, dict[str, str]] = {}
    if scope.cluster_configs:
        configs.update(zk_quota_nodes(image.quotas.entities.items()))
    if scope.cluster:
        if image.producer_ids.next_producer_id > 0:
            next_id = image.producer_ids.next_producer_id
            nodes.append(("/latest_producer_id_block", {"version": 1, "next_producer_id": next_id}))
        for path, entries in _acl_nodes(image).items():
            nodes.append((path, {"version": 1, "acls": entries}))
        for user in image.scram.users():  # shared with the user's quotas, as in ZooKeeper
            config = configs.setdefault(f"/config/users/{zk_sanitize(user)}", {})
            for mechanism, iterations in image.scram.describe(user):
                config[mechanism.mechanism_name] = f"iterations={iterations}"
    for path, config in configs.items():
        nodes.append((path, _config_node(config)))
    nodes.sort(key=lambda n: _path_order(n[0]))
    return nodes
