"""Broker registration, heartbeats, fencing and the cluster description (Kafka's ClusterControlManager)."""

from __future__ import annotations

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataProvenance,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from kraftlog.metadata_log.image import BrokerRegistration, MetadataImage
from kraftlog.proto import admin_pb2, controller_pb2
from kraftlog.quorum.controller._controller_base import (
    BrokerHeartbeats,
    ControllerContext,
    Records,
    _apply,
    _elect_offline_partitions,
    _remove_from_isrs,
    error_pb,
)


def register_broker(
    image: MetadataImage,
    req: controller_pb2.RegisterBrokerRequest,
    ctx: ControllerContext,
    heartbeats: BrokerHeartbeats,
) -> tuple[Records, controller_pb2.RegisterBrokerResponse]:
    """RegisterBroker: a new registration (fenced, with a new epoch) or an idempotent repeat.

    The same incarnation registering again gets its existing epoch back; another incarnation while
    the old session lives gets DUPLICATE_BROKER_REGISTRATION.
    """
    resp = controller_pb2.RegisterBrokerResponse
    if req.cluster_id != ctx.cluster_id:
        return [], resp(
            error=error_pb(
                kerr.InconsistentClusterIdError, f"broker cluster id {req.cluster_id!r} is not {ctx.cluster_id!r}"
            )
        )
    if req.broker_id < 0:
        return [], resp(error=error_pb(kerr.InvalidRequestError, "negative broker id"))
    existing = image.cluster.broker(req.broker_id)
    session_ms = ctx.cfg("broker.session.timeout.ms")
    if existing is not None:
        if existing.incarnation_id == req.incarnation_id:
            heartbeats.touch(req.broker_id, ctx.now_ms)
            return [], resp(error=error_pb(), broker_epoch=existing.broker_epoch)
        if not existing.fenced and heartbeats.is_alive(req.broker_id, ctx.now_ms, session_ms):
            return [], resp(
                error=error_pb(
                    kerr.DuplicateBrokerRegistrationError,
                    f"broker {req.broker_id} is registered by another incarnation whose session is alive",
                )
            )
    supported = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
    for name, level in sorted(image.features.levels.items()):
        low, high = supported.get(name, (0, 0))
        if req.features and not low <= level <= high:
            # Kafka's check; a registration naming no features comes from a build before feature
            # versions and is let in (its node checks the finalized levels itself at start)
            return [], resp(
                error=error_pb(
                    kerr.UnsupportedVersionError,
                    f"broker {req.broker_id} does not support finalized version {level} of {name}"
                    f" (it supports {low}-{high})",
                )
            )
    epoch = ctx.next_offset
    record = RegisterBrokerRecord(
        broker_id=req.broker_id,
        incarnation_id=req.incarnation_id,
        broker_epoch=epoch,
        endpoints=tuple(
            BrokerEndpoint(e.name, e.host, e.port, e.security_protocol or "PLAINTEXT") for e in req.listeners
        ),
        rack=req.rack or None,
        fenced=True,
        in_controlled_shutdown=False,
        log_dirs=tuple(req.log_dirs),
        features=tuple((f.name, f.min_supported_version, f.max_supported_version) for f in req.features),
    )
    records: Records = [record]
    if existing is not None:
        # A new incarnation replaces the old registration (its session expired or it was fenced):
        # the old process is gone, so it must not keep leading or counting in ISRs while the new
        # one is fenced and catching up (what fencing it would have done; Kafka's
        # handleBrokerUncleanShutdown). The new epoch is still the RegisterBrokerRecord's offset.
        # A previous broker epoch other than the old registration's means its last stop was not
        # clean (its log dirs had no marker naming it): it also leaves every ELR (KIP-966).
        unclean = req.previous_broker_epoch != existing.broker_epoch
        records += _remove_from_isrs(_apply(image, records), ctx, {req.broker_id}, unclean_shutdown=unclean)
    heartbeats.touch(req.broker_id, ctx.now_ms)
    return records, resp(error=error_pb(), broker_epoch=epoch)


def broker_heartbeat(
    image: MetadataImage,
    req: controller_pb2.BrokerHeartbeatRequest,
    ctx: ControllerContext,
    heartbeats: BrokerHeartbeats,
) -> tuple[Records, controller_pb2.BrokerHeartbeatResponse]:
    """BrokerHeartbeat: keep the session alive; unfence a caught-up broker; run controlled shutdown.

    A broker is caught up once it has applied the metadata log up to its own registration (its
    broker epoch is that record's offset). ``want_shutdown`` marks the broker in controlled shutdown,
    moves every leadership away and takes it out of ISRs (never emptying one). ``should_shutdown``
    is granted only once the image the heartbeat is evaluated against (the committed one) shows the
    broker leading nothing, so never in the response that proposes the moves: the new leaders get
    at least a heartbeat interval to learn of them (Kafka's CONTROLLED_SHUTDOWN, then SHUTDOWN_NOW).
    Granting it also fences the broker, as Kafka's SHUTDOWN_NOW does, so the next incarnation can
    register at once instead of waiting out the old session.
    """
    resp = controller_pb2.BrokerHeartbeatResponse
    reg = image.cluster.broker(req.broker_id)
    if reg is None:
        return [], resp(error=error_pb(kerr.BrokerIdNotRegisteredError, f"broker {req.broker_id} is not registered"))
    if reg.broker_epoch != req.broker_epoch:
        return [], resp(
            error=error_pb(kerr.StaleBrokerEpochError, f"broker epoch {req.broker_epoch} is not {reg.broker_epoch}")
        )
    heartbeats.touch(req.broker_id, ctx.now_ms)
    caught_up = req.current_metadata_offset >= reg.broker_epoch
    records: Records = []
    should_shutdown = False
    if req.want_shutdown:
        leads = bool(image.topics.partitions_led_by(req.broker_id))
        if not reg.fenced:
            if not reg.in_controlled_shutdown:
                records.append(
                    BrokerRegistrationChangeRecord(
                        broker_id=reg.broker_id, broker_epoch=reg.broker_epoch, in_controlled_shutdown=1
                    )
                )
            # Also on later heartbeats: a no-op once the moves are committed, a retry otherwise.
            records += _remove_from_isrs(_apply(image, records) if records else image, ctx, {reg.broker_id})
            if not leads:
                records.append(FenceBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.broker_epoch))
                records += _remove_from_isrs(_apply(image, records), ctx, {reg.broker_id})
        should_shutdown = not leads
    elif req.want_fence:
        if not reg.fenced:
            records.append(FenceBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.broker_epoch))
            records += _remove_from_isrs(_apply(image, records), ctx, {reg.broker_id})
    elif req.offline_partitions and not reg.fenced:
        # replicas in a failed log dir (Kafka's handleDirectoriesOffline): out of their ISRs and
        # ELRs, leaderships elsewhere; repeated by every heartbeat, a no-op once committed
        offline = frozenset((t.topic_id, p) for t in req.offline_partitions for p in t.partitions)
        records += _remove_from_isrs(image, ctx, {reg.broker_id}, unclean_shutdown=True, only=offline)
    elif reg.fenced and caught_up and not reg.in_controlled_shutdown:
        # A registration in controlled shutdown never comes back (Kafka keeps it in
        # CONTROLLED_SHUTDOWN); the broker re-registers with a new incarnation instead.
        records.append(UnfenceBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.broker_epoch))
        records += _elect_offline_partitions(_apply(image, records), ctx, {reg.broker_id})
        if req.offline_partitions:  # never elected where its log dir failed (it cannot serve there)
            offline = frozenset((t.topic_id, p) for t in req.offline_partitions for p in t.partitions)
            records += _remove_from_isrs(
                _apply(image, records), ctx, {reg.broker_id}, unclean_shutdown=True, only=offline
            )
    after = _apply(image, records) if records else image
    now = after.cluster.broker(req.broker_id)
    assert now is not None
    # image.offset is committed (bare records do not advance it): a lower bound of the quorum's
    # committed offset when the answer is sent, which is all the broker's follower needs
    return records, resp(
        error=error_pb(),
        is_caught_up=caught_up,
        is_fenced=now.fenced,
        should_shutdown=should_shutdown,
        metadata_high_watermark=image.offset,
    )


def fence_expired_brokers(image: MetadataImage, ctx: ControllerContext, heartbeats: BrokerHeartbeats) -> Records:
    """Fence every unfenced broker silent for longer than ``broker.session.timeout.ms``: it leaves
    every ISR and loses its leaderships."""
    session_ms = ctx.cfg("broker.session.timeout.ms")
    live = [b for b, reg in image.cluster.brokers.items() if not reg.fenced]
    expired = heartbeats.expired(live, ctx.now_ms, session_ms)
    if not expired:
        return []
    records: Records = []
    for b in expired:
        reg = image.cluster.broker(b)
        assert reg is not None
        records.append(FenceBrokerRecord(broker_id=b, broker_epoch=reg.broker_epoch))
    records += _remove_from_isrs(_apply(image, records), ctx, set(expired))
    return records


def describe_cluster(
    image: MetadataImage,
    ctx: ControllerContext,
    controller_id: int,
    listener: str | None = None,
    provenance: MetadataProvenance | None = None,
) -> admin_pb2.DescribeClusterResponse:
    """The registered brokers at ``listener`` (default: each one's first); with ``provenance``,
    each one's registration time."""
    R = admin_pb2.DescribeClusterResponse
    registered_ms = provenance.broker_registered_ms if provenance is not None else {}
    brokers = []
    for bid in image.cluster.broker_ids():
        reg = image.cluster.broker(bid)
        assert reg is not None
        ep = _endpoint(reg, listener)
        brokers.append(
            R.Broker(
                broker_id=bid,
                host=ep.host if ep else "",
                port=ep.port if ep else 0,
                rack=reg.rack or "",
                fenced=reg.fenced,
                in_controlled_shutdown=reg.in_controlled_shutdown,
                broker_epoch=reg.broker_epoch,
                registration_timestamp_ms=registered_ms.get(bid),
                security_protocol=ep.security_protocol if ep else "",
            )
        )
    return R(error=error_pb(), cluster_id=ctx.cluster_id, controller_id=controller_id, brokers=brokers)


def _endpoint(reg: BrokerRegistration, listener: str | None) -> BrokerEndpoint | None:
    if listener:
        for ep in reg.endpoints:
            if ep.name == listener:
                return ep
    return reg.endpoints[0] if reg.endpoints else None
