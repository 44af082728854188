"""The ``share.version`` feature (KIP-932, issue 27): its levels and dependency, what a new
cluster is formatted with, the controller's rules for changing it, and the broker's gate: with
``share.version`` 0 every share-group call answers UNSUPPORTED_VERSION before any authorization
or shard, as Kafka's ``KafkaApis.isShareGroupProtocolEnabled``; the image is read per call, so a
finalized change turns them on or off without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import kraftlog.quorum.controller as ctl
from kraftlog.broker.groups._group_service_share import ShareGroupService
from kraftlog.broker.share import ShareFetchCall, ShareFetchService
from kraftlog.common import errors as kerr
from kraftlog.common.security import ANONYMOUS, RequestContext, Session, request_scope
from kraftlog.metadata_log import (
    LATEST_PRODUCTION_METADATA_VERSION,
    SHARE_VERSION,
    SUPPORTED_FEATURES,
    FeatureLevelRecord,
    feature_dependency_problem,
    format_feature_levels,
    metadata_version_level,
    share_groups_enabled,
)
from kraftlog.proto import admin_pb2, group_pb2
from kraftlog.quorum import read_bootstrap_records
from tests.unit.quorum.test_controller import Harness

MV = "metadata.version"
UNSUPPORTED = kerr.UnsupportedVersionError.error_code


# ---------------------------------------------------------------- levels and dependencies


def test_kafka_4_1_and_4_2_metadata_versions_have_kafkas_levels() -> None:
    assert [metadata_version_level(r) for r in ("4.1-IV0", "4.1-IV1", "4.2-IV0", "4.2-IV1")] == [26, 27, 28, 29]
    assert metadata_version_level("4.1") == 27 and metadata_version_level("4.2") == 29  # a release: its last IV
    assert LATEST_PRODUCTION_METADATA_VERSION == 29 == SUPPORTED_FEATURES[MV].max_version
    assert (SUPPORTED_FEATURES[SHARE_VERSION].min_version, SUPPORTED_FEATURES[SHARE_VERSION].max_version) == (0, 1)
    with pytest.raises(ValueError, match="unknown release version"):
        metadata_version_level("4.3")


def test_share_version_1_needs_metadata_version_4_1_iv1() -> None:
    assert "requires metadata.version level 27" in str(feature_dependency_problem({MV: 26, SHARE_VERSION: 1}))
    assert feature_dependency_problem({MV: 27, SHARE_VERSION: 1}) is None
    assert feature_dependency_problem({SHARE_VERSION: 1}) is None  # no metadata.version record: the newest


def test_share_groups_are_on_from_share_version_1() -> None:
    assert not share_groups_enabled({}) and not share_groups_enabled({SHARE_VERSION: 0})
    assert share_groups_enabled({SHARE_VERSION: 1})


# ---------------------------------------------------------------- format


def test_a_new_cluster_has_share_groups_unless_told_otherwise() -> None:
    assert format_feature_levels() == {SHARE_VERSION: 1}  # Kafka 4.2's default
    assert format_feature_levels({SHARE_VERSION: 0}) == {SHARE_VERSION: 0}
    # pinned below 4.2-IV0 (Kafka's SV_1 bootstrap version), the default stays off
    assert format_feature_levels({MV: 27}) == {MV: 27}
    assert format_feature_levels({MV: 27, SHARE_VERSION: 1}) == {MV: 27, SHARE_VERSION: 1}


@pytest.mark.parametrize(
    ("requested", "needle"),
    [
        ({MV: 25, SHARE_VERSION: 1}, "requires metadata.version level 27"),
        ({SHARE_VERSION: 2}, "unsupported level 2 for feature share.version"),
        ({"no.such.version": 1}, "unsupported feature 'no.such.version'"),
        ({"kraft.version": 1}, "unsupported feature 'kraft.version'"),
        ({MV: 0}, "unsupported level 0 for feature metadata.version"),
    ],
)
def test_a_bad_format_feature_is_named(requested: dict[str, int], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        format_feature_levels(requested)


def _node_config(tmp_path: Path) -> Any:
    from kraftlog.common.config import load_node_config

    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "node.toml"
    cfg.write_text(
        f'"node.id" = 1\n"process.roles" = "broker,controller"\n"log.dirs" = "{tmp_path / "data"}"\n'
        f'"metadata.log.dir" = "{tmp_path / "meta"}"\n"controller.quorum.voters" = "1@127.0.0.1:19093"\n'
        '"listeners" = "BROKER://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"\n'
    )
    return load_node_config(cfg)


def test_format_writes_share_version_1_into_the_bootstrap_metadata(tmp_path: Path) -> None:
    from kraftlog.node import NodeStartupError, format_node_dirs, new_cluster_id

    cfg = _node_config(tmp_path)
    format_node_dirs(cfg, new_cluster_id())
    assert read_bootstrap_records(cfg.metadata_log_dir) == [FeatureLevelRecord(SHARE_VERSION, 1)]

    off = _node_config(tmp_path / "off")
    format_node_dirs(off, new_cluster_id(), features={SHARE_VERSION: 0, MV: 27})
    assert read_bootstrap_records(off.metadata_log_dir) == [FeatureLevelRecord(MV, 27)]  # level 0: no record

    bad = _node_config(tmp_path / "bad")
    with pytest.raises(NodeStartupError, match="share.version level 1 requires"):
        format_node_dirs(bad, new_cluster_id(), features={MV: 25, SHARE_VERSION: 1})
    assert not Path(bad.metadata_log_dir).exists()  # refused before anything is written


# ---------------------------------------------------------------- the controller


def _update(h: Harness, levels: dict[str, int], kind: int = 1) -> Any:
    req = admin_pb2.UpdateFeaturesRequest(
        updates=[
            admin_pb2.UpdateFeaturesRequest.FeatureUpdate(feature=n, max_version_level=v, upgrade_type=kind)
            for n, v in levels.items()
        ]
    )
    return h.run(ctl.update_features, req)


def test_the_controller_enables_and_disables_share_version() -> None:
    h = Harness()
    h.start_brokers([1, 2])
    records, resp = _update(h, {MV: 26})
    assert resp.error.name == "NONE", resp.error
    records, resp = _update(h, {SHARE_VERSION: 1})
    assert (resp.error.name, records) == ("INVALID_UPDATE_VERSION", [])
    assert "requires metadata.version level 27" in resp.error.message
    records, resp = _update(h, {MV: 27, SHARE_VERSION: 1})  # both in one request: all or nothing
    assert resp.error.name == "NONE" and FeatureLevelRecord(SHARE_VERSION, 1) in records
    assert h.image.features.level(SHARE_VERSION) == 1
    records, resp = _update(h, {SHARE_VERSION: 0})  # a downgrade needs a downgrade type
    assert resp.error.name == "INVALID_UPDATE_VERSION" and "without the upgrade type" in resp.error.message
    # Kafka refuses nothing else: share groups may exist; their requests are refused from then on
    records, resp = _update(h, {SHARE_VERSION: 0}, kind=2)
    assert (resp.error.name, records) == ("NONE", [FeatureLevelRecord(SHARE_VERSION, 0)])
    assert h.image.features.level(SHARE_VERSION) == 0


def test_only_the_named_features_dependencies_are_checked() -> None:
    """As Kafka's FeatureControlManager: a fresh cluster's share.version 1 (formatted without a
    metadata.version record) does not stop metadata.version being set to 25; naming share.version
    in the same request does."""
    h = Harness()
    h.commit([FeatureLevelRecord(SHARE_VERSION, 1)])
    records, resp = _update(h, {MV: 25})
    assert resp.error.name == "NONE" and records == [FeatureLevelRecord(MV, 25)]
    records, resp = _update(h, {MV: 26, SHARE_VERSION: 1})
    assert resp.error.name == "INVALID_UPDATE_VERSION" and "requires metadata.version level 27" in resp.error.message


# ---------------------------------------------------------------- the broker's gate


class _Image:
    """An image whose finalized levels a test changes, as an UpdateFeatures would."""

    def __init__(self, levels: dict[str, int]) -> None:
        self.features = SimpleNamespace(levels=levels)
        self.topics = SimpleNamespace(get_by_name=lambda _n: None, get_by_id=lambda _i: None)


def _run(call: Any) -> tuple[Any, RequestContext, list[Any]]:
    asked: list[Any] = []

    def authorize(_session: Session, op: Any, kind: Any, name: str | None) -> bool:
        asked.append((op, kind, name))
        return True

    ctx = RequestContext(Session(ANONYMOUS, "127.0.0.1"), api="Share", authorize_fn=authorize)

    async def scoped() -> Any:
        with request_scope(ctx):
            return await call

    return asyncio.run(scoped()), ctx, asked


def _group_service(image: _Image) -> tuple[ShareGroupService, list[str]]:
    reached: list[str] = []

    def shard(group_id: str) -> Any:
        reached.append(group_id)
        from kraftlog.broker.coordinator import ShardUnavailable

        raise ShardUnavailable(kerr.NotCoordinatorError)

    service = ShareGroupService(None, lambda: image, lambda: 0, shard, None)  # type: ignore[arg-type]
    return service, reached


def test_share_group_calls_are_unsupported_while_share_version_is_0() -> None:
    image = _Image({MV: 29})
    service, reached = _group_service(image)
    heartbeat = group_pb2.ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)
    answer, ctx, asked = _run(service.ShareGroupHeartbeat(heartbeat, client_host="/h"))
    assert answer.error.code == UNSUPPORTED and "share.version" in answer.error.message
    assert ctx.decided and asked == [] and reached == []  # before any ACL or shard

    describe = group_pb2.ShareGroupDescribeRequest(group_ids=["g", "h"])
    answer, _ctx, asked = _run(service.ShareGroupDescribe(describe))
    assert [(g.group_id, g.error.code) for g in answer.groups] == [("g", UNSUPPORTED), ("h", UNSUPPORTED)]

    offsets = group_pb2.DescribeShareGroupOffsetsRequest()
    offsets.groups.add(group_id="g", all_topics=True)
    answer, _ctx, _asked = _run(service.DescribeShareGroupOffsets(offsets))
    assert [(g.group_id, g.error.code) for g in answer.groups] == [("g", UNSUPPORTED)]

    answer, _ctx, _asked = _run(service.AlterShareGroupOffsets(group_pb2.AlterShareGroupOffsetsRequest(group_id="g")))
    assert answer.error.code == UNSUPPORTED
    delete = group_pb2.DeleteShareGroupOffsetsRequest(group_id="g", topic_names=["t"])
    answer, _ctx, _asked = _run(service.DeleteShareGroupOffsets(delete))
    assert answer.error.code == UNSUPPORTED
    assert reached == [] and asked == []

    image.features.levels[SHARE_VERSION] = 1  # finalized at run time: the next call goes through
    answer, _ctx, asked = _run(service.ShareGroupHeartbeat(heartbeat, client_host="/h"))
    assert answer.error.code == kerr.NotCoordinatorError.error_code and reached == ["g"] and asked


def test_share_fetch_and_acknowledge_are_unsupported_while_share_version_is_0() -> None:
    image = _Image({})
    touched: list[str] = []
    sessions: Any = SimpleNamespace(begin=lambda *a: touched.append("session"))
    service = ShareFetchService(None, sessions, lambda: image)  # type: ignore[arg-type]
    for fetch in (True, False):
        call = ShareFetchCall(group_id="g", member_id="m", epoch=0 if fetch else 1, topics=[], fetch=fetch)
        answer, ctx, asked = _run(service.serve(call))
        assert answer.error is kerr.UnsupportedVersionError and "share.version" in answer.message
        assert ctx.decided and asked == [] and touched == []
    image.features.levels[SHARE_VERSION] = 1
    call = ShareFetchCall(group_id="g", member_id="", epoch=0, topics=[], fetch=True)
    answer, _ctx, asked = _run(service.serve(call))
    assert answer.error is kerr.InvalidRequestError and asked  # past the gate: the group was authorized


def test_turning_share_version_off_drops_the_sessions_and_share_partitions() -> None:
    """Kafka's SharePartitionManager.onShareVersionToggle: off, the broker forgets every share
    session and every share partition it holds (their state is the share coordinator's)."""
    from kraftlog.broker.share._share_sessions import ShareSessionCache

    forgotten: list[str] = []

    class _Manager:
        async def forget_all(self) -> None:
            forgotten.append("all")

    sessions = ShareSessionCache(10)
    sessions.begin("g", "m1", 0)
    sessions.begin("g", "m2", 0)
    service = ShareFetchService(_Manager(), sessions, lambda: _Image({}))  # type: ignore[arg-type]

    async def toggle() -> None:
        service.on_share_version(True)  # on: nothing is dropped
        await asyncio.sleep(0)
        assert len(sessions) == 2 and forgotten == []
        service.on_share_version(False)
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(toggle())
    assert len(sessions) == 0 and sessions.get("g", "m1") is None and forgotten == ["all"]
