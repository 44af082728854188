"""`Admin`: every AdminService call, following NOT_CONTROLLER to the active controller.

The bootstrap list may name any controllers (and, once brokers forward admin calls, brokers). A call
goes to the last known active controller first; a NOT_CONTROLLER answer carries the active
controller's address, which the client follows; an unreachable server or a quorum without a leader
is retried with backoff until ``request_timeout_ms`` runs out. That loop is the one request driver
(`kraftlog.common._request_driver`), which the brokers' controller channel runs too. Results keep Kafka's error names:
`Admin` returns the responses as they are, and ``raise_for_errors`` turns their errors into typed
exceptions for callers that prefer them.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import grpc
import structlog

from kraftlog.client._security import client_security
from kraftlog.client._transport import Transport
from kraftlog.common import (
    Call,
    Done,
    Outcome,
    Redirect,
    RequestDriver,
    Retry,
    RetryPolicy,
    Route,
    drive,
    parse_bootstrap_servers,
    wait_until,
)
from kraftlog.common import errors as kerr
from kraftlog.common.security import ScramMechanism, scram_salted_password
from kraftlog.proto import RECONNECT_OPTIONS, admin_pb2, admin_pb2_grpc, controller_pb2, quotas_pb2, security_pb2

__all__ = ["Admin", "raise_for_errors", "parse_bootstrap_servers", "NewTopic"]

_NOT_CONTROLLER = kerr.NotControllerError.error_code
_log = structlog.get_logger(__name__)


def _errors_of(response: Any) -> list[Any]:
    """Every Error message a response carries (top level and per item)."""
    found = []
    for field, value in response.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            continue  # map<string, string> fields (configs) hold no errors
        if field.message_type is not None and field.message_type.name == "Error":
            found.append(value)
        elif field.message_type is not None and field.is_repeated:
            for item in value:
                found.extend(_errors_of(item))
        elif field.message_type is not None and field.message_type.name not in ("ControllerHint",):
            found.extend(_errors_of(value))
    return found


def _not_controller(response: Any) -> bool:
    errs = _errors_of(response)
    return (
        bool(errs)
        and any(e.code == _NOT_CONTROLLER for e in errs)
        and all(e.code in (0, _NOT_CONTROLLER) for e in errs)
    )


def raise_for_errors(response: Any) -> Any:
    """Raise the first non-NONE error in ``response`` as its typed `KafkaError`."""
    for err in _errors_of(response):
        if err.code != 0:
            kerr.raise_for_code(err.code, err.message or err.name)
    return response


class NewTopic:
    """A topic to create: a partition count and replication factor, or an explicit assignment."""

    def __init__(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        assignments: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.configs = dict(configs or {})
        self.assignments = dict(assignments or {})

    def to_pb(self) -> admin_pb2.CreateTopicsRequest.CreatableTopic:
        return admin_pb2.CreateTopicsRequest.CreatableTopic(
            name=self.name,
            num_partitions=self.num_partitions,
            replication_factor=self.replication_factor,
            configs=self.configs,
            assignments=[
                admin_pb2.ReplicaAssignment(partition_index=p, broker_ids=list(b))
                for p, b in sorted(self.assignments.items())
            ],
        )


class Admin:
    """A blocking admin client; thread-safe for concurrent calls."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        attempt_timeout_ms: int = 5000,
        max_message_bytes: int = 104_857_600,
        security_protocol: str = "PLAINTEXT",
        transport: Transport | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        **ssl: Any,
    ) -> None:
        """``security_protocol`` and kafka-python's ``ssl_cafile``, ``ssl_certfile``,
        ``ssl_keyfile``, ``ssl_password``, ``ssl_check_hostname`` (or a `TlsSettings` as ``tls``)
        and kafka-python's ``sasl_*`` arguments secure the channels (see `client_security`).
        ``transport`` replaces the network (a `MockTransport` in unit tests); ``clock``, ``sleep``
        and ``rng`` are the time and randomness the retries use."""
        self.servers = parse_bootstrap_servers(bootstrap_servers)
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        # one unresponsive server (paused, partitioned) must not eat the whole request timeout
        self.attempt_timeout_ms = attempt_timeout_ms
        self._options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            *RECONNECT_OPTIONS,
        ]
        self._security = client_security(security_protocol, transport=transport, **ssl)
        self._channels: dict[str, grpc.Channel] = {}
        self._policy = RetryPolicy(retry_backoff_ms, retry_backoff_max_ms, attempt_timeout_ms)
        # the last controller that answered as active, shared by every call
        self._route = Route(list(self.servers))
        self._rng = rng or random.Random()
        self._clock = clock
        self._sleep = sleep

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stub(self, address: str) -> admin_pb2_grpc.AdminServiceStub:
        ch = self._channels.get(address)
        if ch is None:
            ch = self._security.open(address, self._options)
            self._channels[address] = ch
        return admin_pb2_grpc.AdminServiceStub(ch)

    def call(self, method: str, request: Any, *, timeout_ms: int | None = None) -> Any:
        """Send one AdminService call, following NOT_CONTROLLER hints and retrying retriable
        failures until the timeout (the one request driver, `kraftlog.common._request_driver`);
        returns the last response (errors and all)."""
        budget_ms = timeout_ms or self.request_timeout_ms
        driver = RequestDriver(self._clock() + budget_ms / 1000.0, self._policy, self._route, self._rng)

        def attempt(call: Call) -> Outcome:
            try:
                response = getattr(self._stub(call.address), method)(request, timeout=call.timeout_s)
            except grpc.RpcError as err:
                code = err.code().name if hasattr(err, "code") else str(err)
                timed_out = kerr.RequestTimedOutError(
                    f"{method}: no controller answered within {budget_ms} ms (last error: {code})"
                )
                return Retry(code, error=timed_out)
            if not _not_controller(response):
                return Done(response)
            hint: controller_pb2.ControllerHint | None = getattr(response, "controller", None)
            return Redirect(hint.leader_address if hint is not None else "", response)

        return drive(driver, attempt, what=method, clock=self._clock, sleep=self._sleep)

    # ------------------------------------------------------------------ typed helpers

    def create_topics(
        self, topics: Iterable[NewTopic], *, validate_only: bool = False, timeout_ms: int = 30_000
    ) -> admin_pb2.CreateTopicsResponse:
        req = admin_pb2.CreateTopicsRequest(
            topics=[t.to_pb() for t in topics], timeout_ms=timeout_ms, validate_only=validate_only
        )
        response: admin_pb2.CreateTopicsResponse = self.call("CreateTopics", req, timeout_ms=timeout_ms)
        return response

    def delete_topics(
        self, names: Iterable[str] = (), topic_ids: Iterable[str] = (), *, timeout_ms: int = 30_000
    ) -> admin_pb2.DeleteTopicsResponse:
        response: admin_pb2.DeleteTopicsResponse = self.call(
            "DeleteTopics",
            admin_pb2.DeleteTopicsRequest(names=list(names), topic_ids=list(topic_ids), timeout_ms=timeout_ms),
            timeout_ms=timeout_ms,
        )
        return response

    def create_partitions(
        self,
        counts: Mapping[str, int],
        *,
        validate_only: bool = False,
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        timeout_ms: int = 30_000,
    ) -> admin_pb2.CreatePartitionsResponse:
        topics = []
        for name, count in counts.items():
            assign = [admin_pb2.ReplicaAssignment(broker_ids=list(b)) for b in (assignments or {}).get(name, [])]
            topics.append(admin_pb2.CreatePartitionsRequest.Topic(name=name, count=count, assignments=assign))
        response: admin_pb2.CreatePartitionsResponse = self.call(
            "CreatePartitions",
            admin_pb2.CreatePartitionsRequest(topics=topics, timeout_ms=timeout_ms, validate_only=validate_only),
            timeout_ms=timeout_ms,
        )
        return response

    def describe_topics(self, names: Iterable[str] = ()) -> admin_pb2.DescribeTopicsResponse:
        response: admin_pb2.DescribeTopicsResponse = self.call(
            "DescribeTopics", admin_pb2.DescribeTopicsRequest(names=list(names))
        )
        return response

    def list_topics(self) -> list[str]:
        return [t.name for t in self.describe_topics().topics]

    def describe_cluster(self) -> admin_pb2.DescribeClusterResponse:
        response: admin_pb2.DescribeClusterResponse = self.call("DescribeCluster", admin_pb2.DescribeClusterRequest())
        return response

    def describe_quorum(self) -> admin_pb2.DescribeQuorumResponse:
        response: admin_pb2.DescribeQuorumResponse = self.call("DescribeQuorum", admin_pb2.DescribeQuorumRequest())
        return response

    def add_raft_voter(
        self, voter_id: int, directory_id: str, host: str, port: int, *, timeout_ms: int = 30_000
    ) -> admin_pb2.AddRaftVoterResponse:
        """AddRaftVoter (KIP-853): make the observer ``(voter_id, directory_id)`` a voter."""
        request = admin_pb2.AddRaftVoterRequest(
            voter_id=voter_id, voter_directory_id=directory_id, host=host, port=port, timeout_ms=timeout_ms
        )
        response: admin_pb2.AddRaftVoterResponse = self.call("AddRaftVoter", request)
        return response

    def update_raft_voter(
        self, voter_id: int, directory_id: str, host: str, port: int, *, kraft_version_max: int = 1
    ) -> admin_pb2.UpdateRaftVoterResponse:
        """UpdateRaftVoter (KIP-853): a voter's directory id, endpoint and kraft.version range."""
        request = admin_pb2.UpdateRaftVoterRequest(
            voter_id=voter_id,
            voter_directory_id=directory_id,
            host=host,
            port=port,
            kraft_version_min=0,
            kraft_version_max=kraft_version_max,
            current_leader_epoch=-1,
        )
        response: admin_pb2.UpdateRaftVoterResponse = self.call("UpdateRaftVoter", request)
        return response

    def remove_raft_voter(self, voter_id: int, directory_id: str) -> admin_pb2.RemoveRaftVoterResponse:
        """RemoveRaftVoter (KIP-853): remove voter ``(voter_id, directory_id)``."""
        request = admin_pb2.RemoveRaftVoterRequest(voter_id=voter_id, voter_directory_id=directory_id)
        response: admin_pb2.RemoveRaftVoterResponse = self.call("RemoveRaftVoter", request)
        return response

    def elect_leaders(
        self, election_type: int = 0, partitions: Mapping[str, Sequence[int]] | None = None, *, timeout_ms: int = 30_000
    ) -> admin_pb2.ElectLeadersResponse:
        tps = [admin_pb2.TopicPartitions(topic=t, partitions=list(p)) for t, p in (partitions or {}).items()]
        response: admin_pb2.ElectLeadersResponse = self.call(
            "ElectLeaders",
            admin_pb2.ElectLeadersRequest(election_type=election_type, topic_partitions=tps, timeout_ms=timeout_ms),
            timeout_ms=timeout_ms,
        )
        return response

    def describe_features(self) -> admin_pb2.DescribeFeaturesResponse:
        """The finalized feature levels and the levels the answering controller supports."""
        response: admin_pb2.DescribeFeaturesResponse = self.call(
            "DescribeFeatures", admin_pb2.DescribeFeaturesRequest()
        )
        return response

    def update_features(
        self, levels: Mapping[str, int], *, upgrade_type: int = 1, validate_only: bool = False, timeout_ms: int = 30_000
    ) -> admin_pb2.UpdateFeaturesResponse:
        """Finalize ``{feature: level}`` (UpdateFeatures, Kafka API 57): ``upgrade_type`` 1 upgrades,
        2 is a safe and 3 an unsafe downgrade; all or nothing."""
        updates = [
            admin_pb2.UpdateFeaturesRequest.FeatureUpdate(feature=n, max_version_level=lvl, upgrade_type=upgrade_type)
            for n, lvl in levels.items()
        ]
        response: admin_pb2.UpdateFeaturesResponse = self.call(
            "UpdateFeatures",
            admin_pb2.UpdateFeaturesRequest(updates=updates, validate_only=validate_only, timeout_ms=timeout_ms),
            timeout_ms=timeout_ms,
        )
        return response

    def alter_partition_reassignments(
        self, plan: Mapping[tuple[str, int], Sequence[int] | None], *, timeout_ms: int = 30_000
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        """``{(topic, partition): target replicas, or None to cancel}``."""
        by_topic: dict[str, list[Any]] = {}
        for (topic, pid), replicas in plan.items():
            by_topic.setdefault(topic, []).append(
                admin_pb2.AlterPartitionReassignmentsRequest.Partition(
                    partition_index=pid, replicas=list(replicas or []), cancel=replicas is None
                )
            )
        req = admin_pb2.AlterPartitionReassignmentsRequest(
            topics=[
                admin_pb2.AlterPartitionReassignmentsRequest.Topic(name=t, partitions=ps) for t, ps in by_topic.items()
            ],
            timeout_ms=timeout_ms,
        )
        response: admin_pb2.AlterPartitionReassignmentsResponse = self.call(
            "AlterPartitionReassignments", req, timeout_ms=timeout_ms
        )
        return response

    def list_partition_reassignments(
        self, partitions: Mapping[str, Sequence[int]] | None = None
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        tps = [admin_pb2.TopicPartitions(topic=t, partitions=list(p)) for t, p in (partitions or {}).items()]
        response: admin_pb2.ListPartitionReassignmentsResponse = self.call(
            "ListPartitionReassignments", admin_pb2.ListPartitionReassignmentsRequest(topics=tps)
        )
        return response

    def describe_configs(
        self,
        resources: Iterable[tuple[int, str]],
        names: Iterable[str] = (),
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> admin_pb2.DescribeConfigsResponse:
        """Each resource's configs; with ``include_synonyms`` every layer a value could come from
        (Kafka's order: dynamic topic, dynamic broker, dynamic default, static, default), with
        ``include_documentation`` each key's documentation."""
        req = admin_pb2.DescribeConfigsRequest(
            resources=[
                admin_pb2.DescribeConfigsRequest.Resource(
                    resource=admin_pb2.ConfigResource(resource_type=t, resource_name=n), config_names=list(names)
                )
                for t, n in resources
            ],
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )
        response: admin_pb2.DescribeConfigsResponse = self.call("DescribeConfigs", req)
        return response

    def incremental_alter_configs(
        self, changes: Mapping[tuple[int, str], Sequence[tuple[str, int, str]]], *, validate_only: bool = False
    ) -> admin_pb2.IncrementalAlterConfigsResponse:
        """``{(resource_type, name): [(key, op, value), ...]}`` with op 0 SET, 1 DELETE, 2 APPEND,
        3 SUBTRACT."""
        req = admin_pb2.IncrementalAlterConfigsRequest(
            validate_only=validate_only,
            resources=[
                admin_pb2.IncrementalAlterConfigsRequest.Resource(
                    resource=admin_pb2.ConfigResource(resource_type=t, resource_name=n),
                    configs=[admin_pb2.IncrementalAlterConfigsRequest.Op(name=k, op=op, value=v) for k, op, v in ops],
                )
                for (t, n), ops in changes.items()
            ],
        )
        response: admin_pb2.IncrementalAlterConfigsResponse = self.call("IncrementalAlterConfigs", req)
        return response

    # ------------------------------------------------------------------ ACLs and SCRAM credentials

    def create_acls(self, bindings: Iterable[security_pb2.AclBinding]) -> security_pb2.CreateAclsResponse:
        """Create ACLs (Kafka's CreateAcls): one result per binding, in order."""
        response: security_pb2.CreateAclsResponse = self.call(
            "CreateAcls", security_pb2.CreateAclsRequest(creations=list(bindings))
        )
        return response

    def describe_acls(self, acl_filter: security_pb2.AclBindingFilter) -> security_pb2.DescribeAclsResponse:
        """The ACLs ``acl_filter`` matches (Kafka's DescribeAcls)."""
        response: security_pb2.DescribeAclsResponse = self.call(
            "DescribeAcls", security_pb2.DescribeAclsRequest(filter=acl_filter)
        )
        return response

    def delete_acls(self, filters: Iterable[security_pb2.AclBindingFilter]) -> security_pb2.DeleteAclsResponse:
        """Delete every ACL each filter matches (Kafka's DeleteAcls): one result per filter."""
        response: security_pb2.DeleteAclsResponse = self.call(
            "DeleteAcls", security_pb2.DeleteAclsRequest(filters=list(filters))
        )
        return response

    def describe_user_scram_credentials(
        self, users: Iterable[str] = ()
    ) -> security_pb2.DescribeUserScramCredentialsResponse:
        """Mechanisms and iterations of the users' SCRAM credentials (none named: every user)."""
        response: security_pb2.DescribeUserScramCredentialsResponse = self.call(
            "DescribeUserScramCredentials", security_pb2.DescribeUserScramCredentialsRequest(users=list(users))
        )
        return response

    def alter_user_scram_credentials(
        self,
        upsertions: Iterable[tuple[str, int, str, int]] = (),
        deletions: Iterable[tuple[str, int]] = (),
    ) -> security_pb2.AlterUserScramCredentialsResponse:
        """Set ``(user, mechanism, password, iterations)`` credentials and delete ``(user,
        mechanism)`` ones. As Kafka's Admin does, the password is salted and iterated here and only
        the salted password travels (RFC 5802 Hi()); the controller derives the keys it stores."""
        R = security_pb2.AlterUserScramCredentialsRequest
        ups = []
        for user, mechanism, password, iterations in upsertions:
            salt = secrets.token_bytes(32)
            salted = scram_salted_password(ScramMechanism(mechanism), password, salt, iterations)
            ups.append(
                R.Upsertion(name=user, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)
            )
        request = R(upsertions=ups, deletions=[R.Deletion(name=u, mechanism=m) for u, m in deletions])
        response: security_pb2.AlterUserScramCredentialsResponse = self.call("AlterUserScramCredentials", request)
        return response

    # ------------------------------------------------------------------ client quotas (KIP-546)

    def describe_client_quotas(
        self, components: Iterable[tuple[str, int, str | None]] = (), *, strict: bool = False
    ) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """The quota entities a filter matches (Kafka's DescribeClientQuotas): ``components`` are
        ``(entity_type, match_type, match)`` with match_type 0 (exact name), 1 (the default) or
        2 (any name); none matches every entity unless ``strict``. Each result is ``(entity,
        values)``, an entity being ``(entity_type, name or None for the default)`` pairs."""
        C = quotas_pb2.DescribeClientQuotasRequest.Component
        pbs = []
        for entity_type, match_type, match in components:
            c = C(entity_type=entity_type, match_type=match_type)
            if match is not None:
                c.match = match
            pbs.append(c)
        response: quotas_pb2.DescribeClientQuotasResponse = self.call(
            "DescribeClientQuotas", quotas_pb2.DescribeClientQuotasRequest(components=pbs, strict=strict)
        )
        if response.error.code:
            raise kerr.error_for_code(response.error.code)(response.error.message)
        return [
            (
                tuple((c.entity_type, c.entity_name if c.HasField("entity_name") else None) for c in e.entity),
                dict(e.values),
            )
            for e in response.entries
        ]

    def alter_client_quotas(
        self,
        alterations: Iterable[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
        *,
        validate_only: bool = False,
    ) -> quotas_pb2.AlterClientQuotasResponse:
        """Set or remove quotas (Kafka's AlterClientQuotas): each alteration is ``(entity, ops)``,
        the entity mapping entity types to names (None: the default), the ops mapping keys to a
        value or None to remove the key. One result per alteration, in order."""
        R = quotas_pb2.AlterClientQuotasRequest
        entries = []
        for entity, ops in alterations:
            components = []
            for entity_type, name in entity.items():
                c = quotas_pb2.QuotaEntityComponent(entity_type=entity_type)
                if name is not None:
                    c.entity_name = name
                components.append(c)
            entries.append(
                R.Entry(
                    entity=components,
                    ops=[
                        R.Op(key=k, remove=True) if v is None else R.Op(key=k, value=float(v)) for k, v in ops.items()
                    ],
                )
            )
        response: quotas_pb2.AlterClientQuotasResponse = self.call(
            "AlterClientQuotas", R(entries=entries, validate_only=validate_only)
        )
        return response

    def wait_for(self, predicate: Callable[[Admin], bool], timeout_s: float = 30.0, interval_s: float = 0.1) -> bool:
        """Poll ``predicate(self)`` until it holds or the timeout passes (for tools and tests);
        a predicate that fails with a Kafka or gRPC error counts as not holding yet."""

        def holds() -> bool:
            try:
                return bool(predicate(self))
            except (kerr.KafkaError, grpc.RpcError):
                return False

        return wait_until(holds, timeout_s=timeout_s, interval_s=interval_s, clock=self._clock, sleep=self._sleep)
