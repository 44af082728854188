"""The broker role of a node: storage, metadata following, replication and the gRPC services.

Start order (persist before serving): open the log dirs (recovering after an unclean stop), follow
the metadata log, register with the controller, and serve. Until the controller unfences the broker
(its metadata has caught up with its own registration) the health service says NOT_SERVING and
clients are told NOT_LEADER_OR_FOLLOWER by the replica manager, which only acts on applied metadata.

Stop order (controlled shutdown, SIGTERM): ask the controller to move every leadership away, wait
until it says the broker may stop, then stop fetchers, flush and checkpoint the logs, write the
clean-shutdown marker, and close the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

import grpc
import structlog
from prometheus_client import CollectorRegistry

from kraftlog.broker._broker_servicers import BrokerServicer, DiagnosticsServicer, forwarding_admin_service, maybe_await
from kraftlog.broker._controller_channel import ControllerChannel
from kraftlog.broker._coordinator_servicers import GroupServicer, ShareCoordinatorServicer, TxnServicer
from kraftlog.broker._lifecycle import BrokerLifecycle
from kraftlog.broker._listeners import (
    BROKER_LISTENER,
    advertised_broker_listener,
    broker_listener,
    broker_listener_name,
    kafka_listeners,
)
from kraftlog.broker._metadata_response import metadata_response
from kraftlog.broker._topic_creation import TopicCreator
from kraftlog.broker.coordinator import ShardUnavailable
from kraftlog.broker.groups import OFFSETS_TOPIC, GroupCoordinator, GroupLag, GroupService, latest_offsets
from kraftlog.broker.quota import (
    QuotaCollector,
    QuotaManagers,
)
from kraftlog.broker.replica import (
    AlterPartitionManager,
    BrokerStateCollector,
    BrokerTopicMetrics,
    MetadataFollower,
    ReplicaFetcherManager,
    ReplicaManager,
    error_pb,
    grpc_stream_opener,
)
from kraftlog.broker.share import (
    SHARE_STATE_TOPIC,
    DeadLetterWriter,
    ShareCoordinator,
    ShareFetchService,
    ShareGroupForgetter,
    ShareGroupMetrics,
    SharePartitionManager,
    SharePersister,
    ShareServicer,
    ShareSessionCache,
    ShareStateService,
    broker_append,
    forget_over_grpc,
    group_partition_config,
)
from kraftlog.broker.txn import (
    TXN_TOPIC,
    ProducerIdManager,
    TxnCoordinator,
    TxnService,
    TxnVerifyClient,
    allocate_from_controller,
    init_producer_id,
)
from kraftlog.common import SYSTEM_CLOCK, topic_name_problem
from kraftlog.common import errors as kerr
from kraftlog.common.security import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    ListenerSecurity,
    ResourceType,
    current_request,
    listener_protocol,
)
from kraftlog.metadata_log import AclGate, ConfigResourceType, MetadataDelta, MetadataImage, share_groups_enabled
from kraftlog.proto import (
    RECONNECT_OPTIONS,
    admin_pb2_grpc,
    broker_pb2,
    broker_pb2_grpc,
    controller_pb2,
    diagnostics_pb2_grpc,
    group_pb2_grpc,
    open_aio_channel,
    share_pb2_grpc,
    txn_pb2_grpc,
)

__all__ = ["BrokerServer", "BROKER_LISTENER", "kafka_listeners", "metadata_response"]


class BrokerServer:
    """Wires storage, the metadata follower, the lifecycle and the replica manager together.

    ``registry`` is where the broker's metrics go (the node's, which its metrics endpoint serves;
    a private one when None, so the counters always have a home).
    """

    def __init__(
        self,
        config: Any,
        cluster_id: str,
        *,
        replica_manager_factory: Callable[..., Any] | None = None,
        clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.broker_id: int = config.node_id
        self._clock_ms = clock_ms
        self._log = structlog.get_logger(__name__).bind(node_id=self.broker_id, role="broker")
        self.host, self.port = broker_listener(config)  # where this broker listens
        self.grpc_listener_name = broker_listener_name(config)
        self.advertised_host, self.advertised_port = advertised_broker_listener(config)
        controllers = config.controller_endpoints  # the voters, or controller.quorum.bootstrap.servers
        max_bytes = config["grpc.max.message.bytes"]
        self.grpc_options = [
            ("grpc.max_send_message_length", max_bytes),
            ("grpc.max_receive_message_length", max_bytes),
            *RECONNECT_OPTIONS,
        ]
        # how this broker's listeners are secured, and how it reaches the controllers' listener
        self.grpc_security = ListenerSecurity.from_config(config, self.grpc_listener_name)
        controller_security = ListenerSecurity.from_config(config, "CONTROLLER")
        controller_tls, controller_login = controller_security.tls, controller_security.node_login(config)
        self._peer_login = self.grpc_security.node_login(config)  # towards other brokers' gRPC listeners
        self.channel = ControllerChannel(
            controllers, options=self.grpc_options, tls=controller_tls, sasl=controller_login
        )
        self.follower = MetadataFollower(
            controllers,
            broker_id=self.broker_id,
            listener=self._on_metadata,
            broker_epoch=lambda: self.lifecycle.broker_epoch,
            fetch_timeout_ms=config["controller.quorum.fetch.timeout.ms"],
            open_stream=grpc_stream_opener(controller_tls, controller_login),
            catch_up_to_active_controller=True,
            on_caught_up=lambda: self.lifecycle.heartbeat_now(),  # the controller may unfence it now
        )
        # every request of both listeners is authorized by this gate over the follower's image
        self.acl_gate = AclGate(lambda: self.follower.image, config)
        self.lifecycle = BrokerLifecycle(
            self.channel,
            broker_id=self.broker_id,
            cluster_id=cluster_id,
            listeners=[
                controller_pb2.Endpoint(
                    name=BROKER_LISTENER,
                    host=self.advertised_host,
                    port=self.advertised_port,
                    security_protocol=listener_protocol(config, self.grpc_listener_name),
                )
            ],
            rack=config["broker.rack"],
            log_dirs=config.log_dirs,
            heartbeat_interval_ms=config["broker.heartbeat.interval.ms"],
            session_timeout_ms=config["broker.session.timeout.ms"],
            metadata_offset=lambda: self.follower.offset,
            on_quorum_high_watermark=self.follower.note_quorum_high_watermark,
            previous_broker_epoch=lambda: self.replicas.log_manager.previous_broker_epoch if self.replicas else -1,
        )
        self._replica_manager_factory = replica_manager_factory
        self.topic_creator = TopicCreator(self.channel, self._log)
        self.alter_partition = AlterPartitionManager(
            self.broker_id, lambda: self.lifecycle.broker_epoch, self._send_alter_partition
        )
        self.replicas: Any = None
        self.fetchers: Any = None
        self.groups = GroupCoordinator(
            self.broker_id,
            config,
            replicas=lambda: self.replicas,
            create_offsets_topic=partial(self.topic_creator.create_internal, OFFSETS_TOPIC),
            clock_ms=clock_ms,
        )
        self.group_lag = GroupLag(self.groups, self._leader_of, self._list_offsets_on)
        self.producer_ids = ProducerIdManager(
            lambda: allocate_from_controller(self.channel.call, self.broker_id, lambda: self.lifecycle.broker_epoch)
        )
        self.txn = TxnCoordinator(
            self.broker_id,
            config,
            replicas=lambda: self.replicas,
            image=lambda: self.follower.image,
            create_topic=partial(self.topic_creator.create_internal, TXN_TOPIC),
            producer_ids=self.producer_ids,
            send_markers=self._send_markers,
            clock_ms=clock_ms,
        )
        # the share coordinator (KIP-932) on __share_group_state, and how this broker reaches it
        self.share_coordinator = ShareCoordinator(
            self.broker_id,
            config,
            replicas=lambda: self.replicas,
            image=lambda: self.follower.image,
            create_topic=partial(self.topic_creator.create_internal, SHARE_STATE_TOPIC),
            clock_ms=clock_ms,
        )
        self.share_state_service = ShareStateService(self.share_coordinator)
        self.share_persister = SharePersister(
            self.broker_id,
            self.share_coordinator,
            self.share_state_service,
            lambda: self.follower.image,
            self._share_coordinator_call,
            clock_ms=clock_ms,
        )
        self.groups.share_state_initializer = self.share_persister.initialize
        self.share_partitions = SharePartitionManager(
            self.broker_id,
            config,
            replicas=lambda: self.replicas,
            persister=self.share_persister,
            clock_ms=clock_ms,
            group_config=lambda group_id, base: group_partition_config(
                self.follower.image.configs.config(ConfigResourceType.GROUP, group_id), base, config.__getitem__
            ),
            dead_letters=DeadLetterWriter(
                group_configs=lambda group_id: self.follower.image.configs.config(ConfigResourceType.GROUP, group_id),
                image=lambda: self.follower.image,
                append=broker_append(self.broker_id, lambda: self.replicas, self._peer, self._broker_address, 5_000),
                create_topic=self.topic_creator.create_dead_letter_topic,
                broker_config=config.__getitem__,
                clock_ms=clock_ms,
            ),
        )
        self.groups.share_members_release = lambda gone: self.share_partitions.release_members(
            gone.group_id, gone.member_ids
        )
        self.share_fetch_service = ShareFetchService(
            self.share_partitions,
            ShareSessionCache(config["group.share.max.share.sessions"]),
            lambda: self.follower.image,
        )
        # one service object per coordinator, called by both front ends (gRPC servicers, Kafka handlers)
        self.group_service = GroupService(self.groups, lambda: self.follower.image, self._clock_ms, self.txn)
        self.group_service.share.state_summary = self.share_persister.call
        self.group_service.share.share_state = self.share_persister.call
        self.group_service.share.forget_held = ShareGroupForgetter(
            self.broker_id,
            self.share_partitions.forget_group,
            lambda: self.follower.image,
            self._broker_address,
            forget_over_grpc(self._peer_channel),
            timeout_ms=5_000,
        ).everywhere
        self.group_service.share.latest_offsets = lambda parts: latest_offsets(
            parts, self._leader_of, self._list_offsets_on
        )
        self.txn_service = TxnService(self.txn, self.groups)
        # KIP-890: partition leaders (and TxnOffsetCommit v5) ask the transactional id's coordinator
        self.txn_verify_client = TxnVerifyClient(
            self.broker_id, self.txn_service, self._broker_address, self._peer_channel
        )
        # client quotas (issue 24), enforced from this broker's metadata image by both front ends
        self.quotas = QuotaManagers(
            lambda: self.follower.image.quotas,
            window_num=config["quota.window.num"],
            window_size_s=config["quota.window.size.seconds"],
        )
        from kraftlog.broker.kafka import (
            ConnectionLimiter,
            ConnectionLimits,
            ConnectionMetrics,
            KafkaApis,
            KafkaListener,
        )
        from kraftlog.common.security import listener_prefix

        self.kafka_apis = KafkaApis(self)
        kafka_names = list(kafka_listeners(config))
        # Kafka's ConnectionQuotas: one count over the broker's Kafka listeners (gRPC ones are
        # bounded by grpc options instead, see node._runtime)
        self.connection_limiter = ConnectionLimiter.from_config(config, kafka_names, ConnectionMetrics(registry))
        self.kafka_listeners = [
            KafkaListener(
                name,
                host,
                port,
                supported=self.kafka_apis.supported,
                dispatch=self.kafka_apis.dispatch,
                unsupported=self.kafka_apis.unsupported,
                max_request_bytes=config["socket.request.max.bytes"],
                sendfile=config["kafka.sendfile.enable"],
                node_id=self.broker_id,
                security=ListenerSecurity.from_config(config, name),
                sasl_token=self.kafka_apis.sasl_token,
                limiter=self.connection_limiter,
                limits=ConnectionLimits.from_config(config, listener_prefix(name)),
            )
            for name, ((host, port), _advertised) in kafka_listeners(config).items()
        ]
        self._peer_channels: dict[str, grpc.aio.Channel] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopping = False
        self.metrics = BrokerTopicMetrics(registry)
        self.metrics.registry.register(
            BrokerStateCollector(
                partitions=lambda: self.replicas.partitions() if self.replicas is not None else {},
                # what the follower has loaded, published or not: the initial catch-up's progress
                # shows in the last-applied offset and the lag
                image=lambda: self.follower.loader.loaded,
                metadata_high_watermark=lambda: self.follower.high_watermark,
            )
        )
        self.metrics.registry.register(self.group_lag)
        self.metrics.registry.register(ShareGroupMetrics(self.share_partitions))
        self.metrics.registry.register(QuotaCollector(self.quotas, self.quotas.now_ms))

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the logs (recovering after an unclean stop), then follow metadata and register."""
        factory = self._replica_manager_factory or ReplicaManager.create
        self.replicas = factory(
            self.broker_id, self.config, self.alter_partition, clock_ms=self._clock_ms, metrics=self.metrics
        )
        self.replicas.startup()
        self.replicas.bind_event_loop(asyncio.get_running_loop())
        self.replicas.offline_listeners.append(self.lifecycle.heartbeat_now)
        self.lifecycle.offline_partitions = self.replicas.offline_partitions
        self.replicas.marker_listeners.append(self.groups.on_txn_marker)
        if self.config["transaction.partition.verification.enable"]:
            self.replicas.set_txn_verify(self.txn_verify_client.verify)
        self.fetchers = ReplicaFetcherManager.from_config(
            self.replicas,
            fetch=self._peer_fetch,
            offset_for_leader_epoch=self._peer_offset_for_leader_epoch,
            broker_epoch=lambda: self.lifecycle.broker_epoch,
        )
        self.replicas.fetcher_manager = self.fetchers
        self.groups.start()
        self.txn.start()
        self.share_coordinator.start()
        self.share_partitions.start()
        self.group_lag.start()
        advertised = kafka_listeners(self.config)
        for kl in self.kafka_listeners:  # bound before registering: port 0 gets its real port
            await kl.bind()
            (_host, port), (adv_host, adv_port) = advertised[kl.name]
            self.lifecycle.listeners.append(
                controller_pb2.Endpoint(
                    name=kl.name,
                    host=adv_host,
                    port=adv_port or kl.port,
                    # its protocol as listener.security.protocol.map says (the tree's endpoints and
                    # listener_security_protocol_map are these registrations)
                    security_protocol=listener_protocol(self.config, kl.name),
                )
            )
        self.follower.start()
        self.lifecycle.start()
        self._tasks.append(
            asyncio.get_running_loop().create_task(self.replicas.run_scheduler(), name="broker-scheduler")
        )
        if self.kafka_listeners:
            self._tasks.append(asyncio.get_running_loop().create_task(self._serve_kafka(), name="kafka-listeners"))
        self._log.info("broker_started", address=f"{self.host}:{self.port}")

    async def _serve_kafka(self) -> None:
        """Open the Kafka listeners once this broker caught up with the metadata log (it is
        unfenced then): before, its answers would come from an image missing topics and leaders."""
        await self.lifecycle.unfenced.wait()
        for kl in self.kafka_listeners:
            await kl.start_serving()

    async def wait_ready(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self.lifecycle.unfenced.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    async def wait_fenced(self) -> None:
        """Until the controller fences this broker (its session expired, or it must register again)."""
        await self.lifecycle.fenced_event.wait()

    async def stop(self, *, controlled: bool = True) -> None:
        """Controlled shutdown first (leaderships moved away), then stop and persist everything."""
        self._stopping = True
        if controlled and self.lifecycle.broker_epoch >= 0 and self.config["controlled.shutdown.enable"]:
            timeout_s = max(5.0, self.config["broker.session.timeout.ms"] / 1000.0)
            await self.lifecycle.controlled_shutdown(timeout_s)
        for t in self._tasks:
            t.cancel()
        for kl in self.kafka_listeners:
            await kl.stop()
        await self.group_lag.stop()
        await self.groups.stop()
        await self.txn.stop()
        await self.share_coordinator.stop()
        await self.share_partitions.stop()
        await self.lifecycle.stop()
        await self.follower.stop()
        if self.replicas is not None:
            # checkpoints, closes the logs, writes the clean marker with this registration's epoch
            await self.replicas.shutdown(broker_epoch=self.lifecycle.broker_epoch)
        await self.alter_partition.shutdown()
        for ch in self._peer_channels.values():
            await ch.close()
        await self.channel.close()
        self._log.info("broker_stopped")

    async def _send_alter_partition(
        self, request: controller_pb2.AlterPartitionRequest
    ) -> controller_pb2.AlterPartitionResponse:
        response: controller_pb2.AlterPartitionResponse = await self.channel.call(
            "controller", "AlterPartition", request, timeout_s=10.0
        )
        return response

    async def init_producer_id(self, request: Any) -> broker_pb2.InitProducerIdResponse:
        """InitProducerId (both listeners): with a transactional id, Write on it is needed; without,
        IdempotentWrite on the cluster or Write on some topic (Kafka's rule since KIP-679)."""
        ctx = current_request()
        transactional_id = request.transactional_id if request.HasField("transactional_id") else ""
        if transactional_id:
            if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                return broker_pb2.InitProducerIdResponse(
                    error=error_pb(
                        kerr.TransactionalIdAuthorizationFailedError, f"not authorized: {transactional_id!r}"
                    ),
                    producer_id=-1,
                    producer_epoch=-1,
                )
            return await self.transactional_producer_id(request)
        if not ctx.authorize(
            AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME
        ) and not ctx.authorize_any(AclOperation.WRITE, ResourceType.TOPIC):
            return broker_pb2.InitProducerIdResponse(
                error=error_pb(kerr.ClusterAuthorizationFailedError, "needs IdempotentWrite or Write on a topic"),
                producer_id=-1,
                producer_epoch=-1,
            )
        response: broker_pb2.InitProducerIdResponse = await init_producer_id(self.producer_ids, request)
        return response

    async def transactional_producer_id(self, request: Any) -> broker_pb2.InitProducerIdResponse:
        """InitProducerId with a transactional id, on the id's coordinator."""
        R = broker_pb2.InitProducerIdResponse
        try:
            error, pid, epoch = await self.txn.init_producer_id(
                request.transactional_id, request.transaction_timeout_ms
            )
        except ShardUnavailable as err:
            error, pid, epoch = err.error, -1, -1
        except kerr.KafkaError as err:
            error, pid, epoch = type(err), -1, -1
        return R(error=error_pb(error), producer_id=pid, producer_epoch=epoch)

    async def _send_markers(
        self, leader: int, request: broker_pb2.WriteTxnMarkersRequest
    ) -> broker_pb2.WriteTxnMarkersResponse:
        """WriteTxnMarkers to a partition leader (this broker's own replica manager when it leads)."""
        if leader == self.broker_id:
            answer: broker_pb2.WriteTxnMarkersResponse = await self.replicas.write_txn_markers(request)
            return answer
        address = self._broker_address(leader)
        if address is None:
            raise kerr.LeaderNotAvailableError(f"broker {leader} has no endpoint")
        response: broker_pb2.WriteTxnMarkersResponse = await self._peer(address).WriteTxnMarkers(
            request, timeout=request.timeout_ms / 1000.0 + 5.0
        )
        return response

    def _broker_address(self, broker_id: int) -> str | None:
        """``host:port`` of a broker's broker listener (gRPC), from the image."""
        reg = self.follower.image.cluster.broker(broker_id)
        ep = None if reg is None else (reg.endpoint(BROKER_LISTENER) or (reg.endpoints or [None])[0])
        if ep is None:
            return None
        host = f"[{ep.host}]" if ":" in ep.host else ep.host
        return f"{host}:{ep.port}"

    def _peer(self, address: str) -> broker_pb2_grpc.BrokerServiceStub:
        return broker_pb2_grpc.BrokerServiceStub(self._peer_channel(address))

    def _peer_channel(self, address: str) -> grpc.aio.Channel:
        ch = self._peer_channels.get(address)
        if ch is None:
            ch = open_aio_channel(address, options=self.grpc_options, tls=self.grpc_security.tls, sasl=self._peer_login)
            self._peer_channels[address] = ch
        return ch

    async def _peer_fetch(self, address: str, request: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        timeout = request.max_wait_ms / 1000.0 + 10.0
        response: broker_pb2.FetchResponse = await self._peer(address).Fetch(request, timeout=timeout)
        return response

    async def _peer_offset_for_leader_epoch(
        self, address: str, request: broker_pb2.OffsetForLeaderEpochRequest
    ) -> broker_pb2.OffsetForLeaderEpochResponse:
        response: broker_pb2.OffsetForLeaderEpochResponse = await self._peer(address).OffsetForLeaderEpoch(
            request, timeout=10.0
        )
        return response

    def _leader_of(self, topic: str, partition: int) -> int:
        t = self.follower.image.topics.get_by_name(topic)
        p = t.partitions.get(partition) if t is not None else None
        return p.leader if p is not None else -1

    async def _list_offsets_on(
        self, node_id: int, request: broker_pb2.ListOffsetsRequest
    ) -> broker_pb2.ListOffsetsResponse:
        """ListOffsets on ``node_id``: answered here when it is this broker."""
        if node_id == self.broker_id:
            response: broker_pb2.ListOffsetsResponse = await maybe_await(self.replicas.list_offsets(request))
            return response
        address = self._broker_address(node_id)
        if address is None:
            raise kerr.BrokerNotAvailableError(f"broker {node_id} has no endpoint")
        remote: broker_pb2.ListOffsetsResponse = await self._peer(address).ListOffsets(request, timeout=5.0)
        return remote

    def _on_metadata(self, delta: MetadataDelta | None, image: MetadataImage, old: MetadataImage) -> None:
        """Every published metadata change: the whole initial catch-up at once, then each batch
        (broker._metadata_follower). A snapshot (no delta) or the first change makes the replica
        manager reconcile every partition of the new image."""
        if self.replicas is None:
            return
        self.replicas.apply_delta(delta if delta is not None else MetadataDelta(image), image)
        self.groups.on_metadata(image)
        self.txn.on_metadata(image)
        self.share_coordinator.on_metadata(image)
        enabled = share_groups_enabled(image.features.levels)
        if enabled != share_groups_enabled(old.features.levels):
            self.share_fetch_service.on_share_version(enabled)

    # ------------------------------------------------------------------ gRPC

    def add_to_server(self, server: grpc.aio.Server) -> None:
        broker_pb2_grpc.add_BrokerServiceServicer_to_server(BrokerServicer(self), server)
        verify = self.txn_verify_client if self.config["transaction.partition.verification.enable"] else None
        group_pb2_grpc.add_GroupServiceServicer_to_server(
            GroupServicer(self.group_service, BROKER_LISTENER, verify), server
        )
        txn_pb2_grpc.add_TxnServiceServicer_to_server(TxnServicer(self.txn_service), server)
        share_pb2_grpc.add_ShareCoordinatorServiceServicer_to_server(
            ShareCoordinatorServicer(self.share_state_service), server
        )
        share_pb2_grpc.add_ShareServiceServicer_to_server(ShareServicer(self.share_fetch_service), server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(forwarding_admin_service(self.channel), server)
        diagnostics_pb2_grpc.add_DiagnosticsServiceServicer_to_server(DiagnosticsServicer(), server)

    async def metadata(
        self, req: broker_pb2.MetadataRequest, *, listener: str = BROKER_LISTENER
    ) -> broker_pb2.MetadataResponse:
        """Metadata, with the brokers' endpoints on ``listener`` (the one the request came on).

        Only topics the caller may describe are shown; a missing topic is auto-created only for a
        caller with Create on the cluster or on that topic (Kafka's rules)."""
        image = self.follower.image
        ctx = current_request()
        every_topic = req.all_topics or not req.topics
        names = list(image.topics.by_name) if every_topic else list(req.topics)
        describable = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        missing = [
            t
            for t in req.topics
            if t in describable and image.topics.get_by_name(t) is None and topic_name_problem(t) is None
        ]
        create_denied: set[str] = set()
        if missing and req.allow_auto_topic_creation and self.config["auto.create.topics.enable"]:
            if not ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
                creatable = ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, missing)
                create_denied = set(missing) - creatable
                missing = [t for t in missing if t in creatable]
            if missing:
                await self.topic_creator.auto_create(missing)
        return metadata_response(
            image,
            req,
            cluster_id=self.cluster_id,
            controller_id=self.follower.leader_id,
            listener=listener,
            auto_created=self.topic_creator.auto_created,
            describable=describable,
            create_denied=create_denied,
        )

    async def _share_coordinator_call(self, node_id: int, api: str, request: Any) -> Any:
        """A share coordinator API (``api``, its RPC name) on broker ``node_id`` over gRPC."""
        address = self._broker_address(node_id)
        if address is None:
            raise kerr.BrokerNotAvailableError(f"broker {node_id} has no endpoint")
        stub = share_pb2_grpc.ShareCoordinatorServiceStub(self._peer_channel(address))
        timeout_s = self.config["share.coordinator.write.timeout.ms"] / 1000.0 + 5.0
        return await getattr(stub, api)(request, timeout=timeout_s)
