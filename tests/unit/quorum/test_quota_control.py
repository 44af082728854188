"""The controller's AlterClientQuotas / DescribeClientQuotas handlers (issue 24, Kafka's
ClientQuotaControlManager rules): records in, answers out."""

from __future__ import annotations

import kraftlog.quorum.controller as ctl
from kraftlog.metadata_log import ClientQuotaRecord
from kraftlog.proto import quotas_pb2 as pb
from tests.unit.quorum.test_controller import Harness

R = pb.AlterClientQuotasRequest


def _component(entity_type: str, name: str | None) -> pb.QuotaEntityComponent:
    c = pb.QuotaEntityComponent(entity_type=entity_type)
    if name is not None:
        c.entity_name = name
    return c


def _entry(components: list[tuple[str, str | None]], **ops: float | None) -> R.Entry:
    return R.Entry(
        entity=[_component(t, n) for t, n in components],
        ops=[R.Op(key=k, remove=True) if v is None else R.Op(key=k, value=v) for k, v in ops.items()],
    )


def test_alter_writes_records_only_for_changes_and_describe_reads_them() -> None:
    h = Harness()
    records, resp = h.run(
        ctl.alter_client_quotas,
        R(entries=[_entry([("user", "alice")], producer_byte_rate=1024, request_percentage=12.5)]),
    )
    assert [r.error.code for r in resp.results] == [0]
    assert records == [
        ClientQuotaRecord(entity=(("user", "alice"),), key="producer_byte_rate", value=1024.0),
        ClientQuotaRecord(entity=(("user", "alice"),), key="request_percentage", value=12.5),
    ]
    # the same value again, and removing a key that is not set: nothing to write
    records, resp = h.run(
        ctl.alter_client_quotas,
        R(entries=[_entry([("user", "alice")], producer_byte_rate=1024, consumer_byte_rate=None)]),
    )
    assert records == [] and resp.results[0].error.code == 0
    records, _ = h.run(ctl.alter_client_quotas, R(entries=[_entry([("user", "alice")], request_percentage=None)]))
    assert records == [ClientQuotaRecord(entity=(("user", "alice"),), key="request_percentage", remove=True)]
    described = ctl.describe_client_quotas(h.image, pb.DescribeClientQuotasRequest())
    assert described.error.code == 0
    assert [(list(e.entity), dict(e.values)) for e in described.entries] == [
        ([_component("user", "alice")], {"producer_byte_rate": 1024.0})
    ]


def test_invalid_entries_fail_alone_with_kafkas_errors() -> None:
    h = Harness()
    records, resp = h.run(
        ctl.alter_client_quotas,
        R(
            entries=[
                _entry([("user", "ok")], consumer_byte_rate=10),
                _entry([("user", "a")], bogus=1),
                _entry([("user", "b")], producer_byte_rate=1.5),
                _entry([("ip", "1.2.3.4")], connection_creation_rate=3),
                _entry([("group", "g")], producer_byte_rate=1),
                _entry([("user", "ok")], consumer_byte_rate=20),
                _entry([("client-id", "c")], producer_byte_rate=5, request_percentage=-1),
            ]
        ),
    )
    codes = [(r.error.code, r.error.message) for r in resp.results]
    assert codes[0] == (0, "")
    assert codes[1] == (42, "Invalid configuration key bogus")
    assert codes[2] == (42, "Configuration producer_byte_rate must be a Long value")
    assert codes[3][0] == 42 and "not supported" in codes[3][1]
    assert codes[4] == (42, "Unhandled client quota entity type: group")
    assert codes[5][0] == 42 and "Ignoring duplicate entity" in codes[5][1]
    assert codes[6][0] == 42  # one bad op fails the whole entry: its valid op is not written either
    assert records == [ClientQuotaRecord(entity=(("user", "ok"),), key="consumer_byte_rate", value=10.0)]


def test_validate_only_answers_without_records() -> None:
    h = Harness()
    records, resp = h.run(
        ctl.alter_client_quotas, R(entries=[_entry([("client-id", None)], producer_byte_rate=10)], validate_only=True)
    )
    assert records == [] and resp.results[0].error.code == 0


def test_describe_refuses_a_bad_filter() -> None:
    C = pb.DescribeClientQuotasRequest.Component
    resp = ctl.describe_client_quotas(
        Harness().image, pb.DescribeClientQuotasRequest(components=[C(entity_type="user", match_type=0)])
    )
    assert resp.error.code == 42 and "MATCH_TYPE_EXACT" in resp.error.message
