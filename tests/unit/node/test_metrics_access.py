"""The metrics endpoint's access rules without sockets (issue 24): label filtering, the bearer
token check, and configs that fail naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from kraftlog.common._config_def import ConfigError
from kraftlog.common.config import NodeConfig
from kraftlog.deploy._certs import load_issued, make_ca, make_certificate
from kraftlog.node._metrics_endpoint import MetricsAccess, without_labels


def _config(tls_dir: Path | None, **extra: Any) -> NodeConfig:
    values: dict[str, Any] = {
        "node.id": 1,
        "process.roles": "broker",
        "listeners": "BROKER://127.0.0.1:9092",
        "controller.quorum.voters": "9@127.0.0.1:9999",
        "log.dirs": "/tmp/x",
    }
    if tls_dir is not None:
        values["listener.security.protocol.map"] = "BROKER:SSL"
        values.update(load_issued(tls_dir, "node-1").ssl_config())
    values.update(extra)
    return NodeConfig.from_mapping(values)


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    make_certificate(make_ca(folder, "metrics test CA"), folder, "node-1", ["127.0.0.1"])
    return folder


def test_without_labels_keeps_families_that_mix_labels() -> None:
    registry = CollectorRegistry()
    mixed = Counter("mixed", "m", ["topic", "kind"], registry=registry)
    mixed.labels("secret", "a").inc()
    Counter("plain", "p", ["kind"], registry=registry).labels("b").inc()
    families = {f.name: f for f in without_labels(registry).collect()}
    assert "mixed" not in families  # every sample named a topic
    assert [s.labels for s in families["plain"].samples if s.name == "plain_total"] == [{"kind": "b"}]
    Counter("per_group", "g", ["group"], registry=registry).labels("payroll").inc()
    assert "per_group" not in {f.name for f in without_labels(registry).collect()}


def test_without_labels_hides_the_users_and_client_ids_of_the_quota_metrics() -> None:
    """A principal's name is what DescribeClientQuotas keeps from those without DescribeConfigs on
    the cluster; the quota gauges carried it to any scraper (review, issue 24)."""
    from kraftlog.broker.quota import QuotaCollector, QuotaManagers
    from kraftlog.common import ManualClock
    from kraftlog.metadata_log import ClientQuotaRecord, MetadataDelta, MetadataImage

    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(ClientQuotaRecord(entity=(("user", "alice"),), key="producer_byte_rate", value=1000.0))
    image = delta.apply()
    clock = ManualClock()
    managers = QuotaManagers(lambda: image.quotas, clock=clock)
    managers.produce.record("alice", "app", 10, clock.monotonic_ms())
    registry = CollectorRegistry()
    registry.register(QuotaCollector(managers, clock.monotonic_ms))
    shown = {f.name for f in registry.collect() if f.samples}
    assert {"kraftlog_quota_byte_rate", "kraftlog_quota_limit"} <= shown
    hidden = {f.name for f in without_labels(registry).collect() if f.samples}
    assert not hidden & {"kraftlog_quota_byte_rate", "kraftlog_quota_limit", "kraftlog_quota_throttle_time_ms"}


def test_the_token_check(tmp_path: Path) -> None:
    token_file = tmp_path / "t"
    token_file.write_text("abc\n")
    access = MetricsAccess(authentication="token", token_file=token_file)
    assert access.authorized("Bearer abc") and access.authorized("bearer  abc ")
    assert not access.authorized(None) and not access.authorized("Basic abc") and not access.authorized("Bearer ab")
    token_file.unlink()
    assert not access.authorized("Bearer abc"), "an unreadable token file refuses every scrape"
    assert MetricsAccess().authorized(None), "authentication none"


def test_acls_decide_whether_topic_labels_are_hidden() -> None:
    acls = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    assert not MetricsAccess.from_config(_config(None)).hide_topic_labels
    assert MetricsAccess.from_config(_config(None, **acls)).hide_topic_labels
    assert not MetricsAccess.from_config(
        _config(None, **acls, **{"metrics.listener.topic.labels": "true"})
    ).hide_topic_labels


def test_bad_access_configs_fail_naming_the_key(tmp_path: Path, tls_dir: Path) -> None:
    with pytest.raises(ConfigError) as err:
        MetricsAccess.from_config(_config(None, **{"metrics.listener.authentication": "certificate"}))
    assert err.value.key == "metrics.listener.authentication"
    with pytest.raises(ConfigError) as err:
        _config(None, **{"metrics.listener.authentication": "token"})
    assert err.value.key == "metrics.listener.token.file"
    empty = tmp_path / "empty.token"
    empty.write_text("  \n")
    for location in (str(empty), str(tmp_path / "missing.token")):
        with pytest.raises(ConfigError) as err:
            MetricsAccess.from_config(
                _config(
                    tls_dir, **{"metrics.listener.authentication": "token", "metrics.listener.token.file": location}
                )
            )
        assert err.value.key == "metrics.listener.token.file"
    with pytest.raises(ConfigError) as err:
        _config(None, **{"metrics.listener.authentication": "password"})
    assert err.value.key == "metrics.listener.authentication"


def test_a_token_file_others_may_read_is_warned_about(tmp_path: Path, tls_dir: Path) -> None:
    from structlog.testing import capture_logs

    token_file = tmp_path / "metrics.token"
    token_file.write_text("abc")
    settings = {"metrics.listener.authentication": "token", "metrics.listener.token.file": str(token_file)}
    for mode, warned in ((0o644, True), (0o600, False)):
        token_file.chmod(mode)
        with capture_logs() as logs:
            MetricsAccess.from_config(_config(tls_dir, **settings))
        assert any(e["event"] == "metrics_token_file_readable_by_others" for e in logs) is warned
